//! Bulkhead names, interned once per distinct name so errors and events carry a
//! `&'static str`: building a rejection allocates nothing and touches no reference count.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Returns the interned copy of `name`, leaking it the first time this name is seen.
/// Memory grows with the number of *distinct* names only, which services keep small.
pub(crate) fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names =
        NAMES.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = names.get(name.as_str()) {
        return existing;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    #[test]
    fn same_name_interns_to_same_pointer() {
        let a = super::intern("bank".to_owned());
        let b = super::intern(String::from("bank"));
        assert!(core::ptr::eq(a, b));
        assert_ne!(super::intern("gateway".to_owned()).as_ptr(), a.as_ptr());
    }
}
