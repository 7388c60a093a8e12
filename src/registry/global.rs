//! The process-wide default registry, and the support the `#[bulkhead]` attribute expands to.

// A plain std `OnceLock` in a `static`: the global registry is created outside any model
// (loom's and shuttle's `OnceLock` cannot live in a `static`), and it synchronizes nothing
// of the engine's: it only publishes the registry once.
use std::sync::OnceLock;

use crate::registry::BulkheadRegistry;

static GLOBAL: OnceLock<BulkheadRegistry> = OnceLock::new();

impl BulkheadRegistry {
    /// The process-wide default registry: the one `#[bulkhead(name = "...")]` (feature
    /// `macros`) uses when the attribute names no `registry`.
    ///
    /// Created on first use with [`BulkheadConfig::default`](crate::BulkheadConfig::default)
    /// as its default configuration, unless [`set_global`](Self::set_global) installed one
    /// before. Configure a bulkhead before its first call with
    /// [`bulkhead_with`](Self::bulkhead_with) (the first creation wins), or install a
    /// registry built from a file with `set_global` at start-up.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    ///
    /// let sber = BulkheadRegistry::global().bulkhead_with("sber-global-doc", BulkheadConfig::for_pool(20))?;
    /// assert_eq!(sber.config().max_concurrent_calls(), 16);
    /// assert!(Arc::ptr_eq(&sber, &BulkheadRegistry::global().bulkhead("sber-global-doc")));
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn global() -> &'static BulkheadRegistry {
        GLOBAL.get_or_init(BulkheadRegistry::default)
    }

    /// Installs `registry` as the process-wide default registry ([`global`](Self::global)).
    /// Only the first installation wins, and only before anything has used the global
    /// registry: a bulkhead already resolved from it stays where it is.
    ///
    /// # Errors
    ///
    /// Gives `registry` back when a global registry already exists (installed earlier, or
    /// created by a call to [`global`](Self::global)).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    ///
    /// let registry = BulkheadRegistry::builder().add_config("sber", BulkheadConfig::for_pool(10)).build()?;
    /// BulkheadRegistry::set_global(registry).expect("nothing used the global registry yet");
    /// assert!(BulkheadRegistry::global().config("sber").is_some());
    /// assert!(BulkheadRegistry::set_global(BulkheadRegistry::default()).is_err(), "the first wins");
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    // The error hands the caller's registry back unchanged (144 bytes with the keyed map,
    // moved once at start-up); boxing it would change the API for nothing.
    #[allow(clippy::result_large_err)]
    pub fn set_global(registry: BulkheadRegistry) -> Result<(), BulkheadRegistry> {
        GLOBAL.set(registry)
    }
}

/// What `#[bulkhead]` expands to. Not public API: no semver guarantees.
#[doc(hidden)]
pub mod __private {
    pub use std::sync::{Arc, OnceLock};

    use crate::bulkhead::error::BulkheadFull;
    use crate::bulkhead::permit::Permit;
    use crate::bulkhead::Bulkhead;
    use crate::registry::BulkheadRegistry;

    /// What a call site resolved, once: the registry's bulkhead for the name. An adaptive
    /// limit attached to it learns from these calls as from any other.
    #[derive(Debug)]
    pub struct Site(Arc<Bulkhead>);

    impl Site {
        /// The entry `name` of `registry` (created with the registry's configuration if
        /// absent).
        #[cold]
        pub fn of(registry: &BulkheadRegistry, name: &str) -> Site {
            Site(registry.bulkhead(name))
        }

        /// [`Bulkhead::acquire`]. Always inlined: a call site then costs about what a
        /// hand-written `acquire` does (`benches/results/macro.md`).
        #[inline(always)]
        pub fn acquire(&self) -> Result<Permit<'_>, BulkheadFull> {
            self.0.acquire()
        }

        /// [`Bulkhead::acquire_async`].
        #[inline]
        pub async fn acquire_async(&self) -> Result<Permit<'_>, BulkheadFull> {
            self.0.acquire_async().await
        }
    }

    /// The entry `name` of the global registry (the attribute without `registry`).
    #[cold]
    pub fn global_bulkhead(name: &str) -> Site {
        Site::of(BulkheadRegistry::global(), name)
    }

    /// The attribute's `registry = X`, as `&X`: `(&Registry(&X)).bulkhead_named(name)`
    /// finds the bulkhead whether `X` is a function (called) or a value that dereferences
    /// to a registry (a `&'static BulkheadRegistry` a call gave, a `LazyLock` or `Arc`
    /// static). Method resolution tries [`ViaFn`] (no auto-ref) before [`ViaDeref`] (one
    /// auto-ref), so the two never compete: a type is either callable or a pointer.
    pub struct Registry<'a, T: ?Sized>(pub &'a T);

    /// `registry = some_fn`: called once per call site.
    pub trait ViaFn {
        /// The bulkhead `name` of the registry `some_fn()` gives.
        fn bulkhead_named(&self, name: &str) -> Site;
    }

    impl<F, R> ViaFn for Registry<'_, F>
    where
        F: Fn() -> R,
        R: core::ops::Deref<Target = BulkheadRegistry>,
    {
        #[cold]
        fn bulkhead_named(&self, name: &str) -> Site {
            Site::of(&(self.0)(), name)
        }
    }

    /// `registry = REGISTRY` or `registry = app::registry()`: a value that dereferences to a
    /// registry.
    pub trait ViaDeref {
        /// The bulkhead `name` of the registry the value points to.
        fn bulkhead_named(&self, name: &str) -> Site;
    }

    impl<T> ViaDeref for &Registry<'_, T>
    where
        T: core::ops::Deref<Target = BulkheadRegistry>,
    {
        #[cold]
        fn bulkhead_named(&self, name: &str) -> Site {
            Site::of(self.0, name)
        }
    }

    /// A refusal as the function's error: `Err(E::from(full))`. A function named so that
    /// a missing `From<BulkheadFull>` reads clearly in the compiler's message.
    #[inline]
    pub fn refusal_into_error<T, E: From<BulkheadFull>>(full: BulkheadFull) -> Result<T, E> {
        Err(E::from(full))
    }
}
