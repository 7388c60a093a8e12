//! The `#[bulkhead]` attribute of the [`bulkhead`](https://docs.rs/bulkhead) crate. Use it
//! through the crate's `macros` feature as `bulkhead::bulkhead`; the documentation with
//! examples is there.
//!
//! What it expands to, for `#[bulkhead(name = "sber")] fn f(..) -> Result<T, E> { body }`:
//!
//! ```text
//! fn f(..) -> Result<T, E> {
//!     let permit = {
//!         static SITE: OnceLock<Site> = OnceLock::new();   // one per call site: the registry's
//!         let bulkhead = SITE.get_or_init(|| ..);           // the registry's bulkhead
//!         match bulkhead.acquire() {                                // .acquire_async().await
//!             Ok(permit) => permit,
//!             Err(full) => return Err(E::from(full)),               // or fallback(.., full)
//!         }
//!     };
//!     body
//! }
//! ```
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Ident, Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, ItemFn, LitStr, Pat, Path, ReturnType, Type};

/// Runs a function or method under a named bulkhead of a registry: the counterpart of
/// Resilience4j's `@Bulkhead(name = "sber")`.
///
/// ```text
/// #[bulkhead(name = "sber")]                            // the global registry's "sber"
/// #[bulkhead(name = "sber", registry = app::registry)]  // a registry you name
/// #[bulkhead(name = "sber", fallback = cached_rates)]   // a refusal calls cached_rates
/// ```
///
/// - `name` (required): the bulkhead's name in the registry. It is created on first use with
///   the registry's configuration for that name, as
///   [`BulkheadRegistry::bulkhead`](../bulkhead/struct.BulkheadRegistry.html#method.bulkhead) does.
/// - `registry` (optional): where the registry is, evaluated once per call site: a function
///   (`registry = app::registry`, called with no arguments), a call (`app::registry()`), or
///   a static (`app::REGISTRY`); the function's result or the value must dereference to a
///   `BulkheadRegistry` (`&'static BulkheadRegistry`, `Arc<BulkheadRegistry>`,
///   `LazyLock<BulkheadRegistry>`). Without it, the process-wide `BulkheadRegistry::global()`.
/// - `fallback` (optional): a function called instead of the body when the bulkhead refuses,
///   with the same arguments followed by the `BulkheadFull` error, as Resilience4j's
///   `fallbackMethod` is, and returning the same type. In a method, a single name
///   (`fallback = cached_rates`) is an associated function of `Self` called with `self` first
///   (so a method `fn cached_rates(&self, .., full: BulkheadFull)`); a path
///   (`fallback = self::cached_rates`) is called as written, also with `self` first. An
///   `async fn` needs an `async` fallback. With a fallback, the arguments must be plain
///   names (they are passed on) and the return type is free.
///
/// Without a fallback the function must return `Result<T, E>` (any type named `Result` or
/// `...Result`, such as `io::Result<T>`) where `E: From<BulkheadFull>`: a refusal returns
/// `Err(E::from(full))`, exactly as the `?` of `Bulkhead::call_fallible` does. Misuse is a
/// compile error that says what to write: no `name`, an unknown argument, a `const fn`, a
/// function without a `Result` and without a fallback.
///
/// # Adaptive bulkheads
///
/// When the registry's bulkhead for the name has an adaptive limit attached
/// (`Bulkhead::set_adaptive_limit`, or a config file's `adaptive:` block), its permit
/// records the call's latency when the body ends, as every permit of that bulkhead does: a
/// success, or a failure if the body panics. An `Err` the body returns is recorded as a
/// success of its latency (the attribute does not look at the value): give the adaptive
/// limit a `timeout` so that slow calls count as failures, or use `Bulkhead::call_fallible`
/// by hand where an `Err` must lower the limit. A call
/// whose future is dropped while the body runs records the time it ran.
///
/// # Cost
///
/// The bulkhead is looked up once per call site, on the first call (a `static OnceLock`
/// in the expansion); every later call is one atomic load to find it, then the bulkhead's
/// own acquire. No allocation per call. A later `remove` or `replace` in the registry does
/// not reach a call site that has already resolved its bulkhead.
///
/// # Blocking, cancel safety
///
/// A sync function takes its permit with `Bulkhead::acquire`: it **blocks** the calling
/// thread up to the bulkhead's `max_wait_duration` (and, like `acquire`, panics rather than
/// park a thread that runs tokio tasks: guard code on a runtime with an `async fn`). An `async fn` takes it with
/// `acquire_async().await`, which is cancel safe: dropping the function's future while it
/// waits leaves the queue; dropping it while the body runs releases the permit. The permit
/// is held until the body returns (or unwinds), and the body runs on the caller's own
/// thread or task.
///
/// # Examples
///
/// The guide's adapter: a refusal becomes the port's "temporarily unavailable" error.
///
/// ```
/// use bulkhead::{bulkhead, BulkheadConfig, BulkheadFull, BulkheadRegistry};
///
/// #[derive(Debug, PartialEq)]
/// enum PortError {
///     TemporarilyUnavailable,
///     Declined(&'static str),
/// }
/// impl From<BulkheadFull> for PortError {
///     fn from(_: BulkheadFull) -> Self {
///         PortError::TemporarilyUnavailable
///     }
/// }
///
/// struct SberPort;
///
/// impl SberPort {
///     #[bulkhead(name = "sber")]
///     fn balance(&self, account: u32) -> Result<u64, PortError> {
///         if account == 0 {
///             return Err(PortError::Declined("no such account"));
///         }
///         Ok(4200)
///     }
/// }
///
/// let sber = BulkheadRegistry::global().bulkhead_with("sber", BulkheadConfig::for_pool(1))?;
/// assert_eq!(SberPort.balance(7), Ok(4200));
/// assert_eq!(SberPort.balance(0), Err(PortError::Declined("no such account")));
///
/// let _busy = sber.try_acquire().unwrap(); // the only slot is taken for 100 ms
/// assert_eq!(SberPort.balance(7), Err(PortError::TemporarilyUnavailable));
/// # Ok::<(), bulkhead::RegistryError>(())
/// ```
///
/// An async port with a fallback and its own registry:
///
/// ```
/// use std::sync::OnceLock;
/// use bulkhead::{bulkhead, BulkheadConfig, BulkheadFull, BulkheadRegistry};
///
/// fn registry() -> &'static BulkheadRegistry {
///     static REGISTRY: OnceLock<BulkheadRegistry> = OnceLock::new();
///     REGISTRY.get_or_init(|| BulkheadRegistry::new(BulkheadConfig::for_pool(1)))
/// }
///
/// #[bulkhead(name = "rates", registry = registry, fallback = cached_rates)]
/// async fn rates(currency: &str) -> f64 {
///     if currency == "EUR" { 101.5 } else { 92.0 }
/// }
///
/// async fn cached_rates(_currency: &str, full: BulkheadFull) -> f64 {
///     assert_eq!(full.bulkhead_name(), "rates");
///     100.0
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert_eq!(rates("EUR").await, 101.5);
/// let _busy = registry().bulkhead("rates").try_acquire_owned().unwrap();
/// assert_eq!(rates("EUR").await, 100.0); // refused: served from the cache
/// # }
/// ```
#[proc_macro_attribute]
pub fn bulkhead(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand(args.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// The attribute's arguments.
#[derive(Default)]
struct Args {
    name: Option<LitStr>,
    registry: Option<Expr>,
    fallback: Option<Path>,
}

fn parse_args(args: TokenStream2) -> syn::Result<Args> {
    let mut parsed = Args::default();
    let parser = syn::meta::parser(|meta| {
        let key = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
        if !meta.input.peek(syn::Token![=]) && ["name", "registry", "fallback"].contains(&&*key) {
            return Err(meta.error(format_args!("`{key}` needs a value: `{key} = ...`")));
        }
        match &*key {
            "name" if parsed.name.is_some() => Err(meta.error("`name` is given twice")),
            "name" => {
                let name: LitStr = meta.value()?.parse().map_err(|err| {
                    syn::Error::new(
                        err.span(),
                        "`name` must be a string literal: `name = \"sber\"`",
                    )
                })?;
                if name.value().is_empty() {
                    return Err(syn::Error::new(name.span(), "`name` must not be empty"));
                }
                parsed.name = Some(name);
                Ok(())
            }
            "registry" if parsed.registry.is_some() => Err(meta.error("`registry` is given twice")),
            "registry" => {
                parsed.registry = Some(meta.value()?.parse()?);
                Ok(())
            }
            "fallback" if parsed.fallback.is_some() => Err(meta.error("`fallback` is given twice")),
            "fallback" => {
                parsed.fallback = Some(meta.value()?.parse().map_err(|err| {
                    syn::Error::new(
                        err.span(),
                        "`fallback` must name a function: `fallback = cached_rates`",
                    )
                })?);
                Ok(())
            }
            _ => {
                let path = &meta.path;
                Err(meta.error(format_args!(
                    "unknown argument `{}`: #[bulkhead] takes `name = \"...\"`, \
                 `registry = <expr>` and `fallback = <fn>`",
                    quote!(#path).to_string().replace(' ', "")
                )))
            }
        }
    });
    parser.parse2(args)?;
    Ok(parsed)
}

fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let args = parse_args(args)?;
    let func: ItemFn = syn::parse2(item).map_err(|err| {
        syn::Error::new(
            err.span(),
            format_args!("#[bulkhead] goes on a function or method with a body: {err}"),
        )
    })?;
    let Some(name) = args.name else {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[bulkhead] needs the bulkhead's name in the registry: #[bulkhead(name = \"sber\")]",
        ));
    };
    let sig = &func.sig;
    if let Some(constness) = &sig.constness {
        return Err(syn::Error::new(
            constness.span(),
            "#[bulkhead] cannot guard a `const fn`: a bulkhead limits calls at run time",
        ));
    }

    let site = Span::mixed_site();
    let full = Ident::new("full", site);
    let is_async = sig.asyncness.is_some();
    let resolve = match &args.registry {
        None => quote_spanned!(name.span()=> ::bulkhead::__private::global_bulkhead(#name)),
        Some(registry) => quote_spanned!(registry.span()=> {
            #[allow(unused_imports)]
            use ::bulkhead::__private::{ViaDeref as _, ViaFn as _};
            (&::bulkhead::__private::Registry(&#registry)).bulkhead_named(#name)
        }),
    };
    let acquire = if is_async {
        quote_spanned!(site=> bulkhead.acquire_async().await)
    } else {
        quote_spanned!(site=> bulkhead.acquire())
    };
    let on_refusal = match &args.fallback {
        Some(fallback) => fallback_call(&func, fallback, &full)?,
        None => {
            let ret = match &sig.output {
                ReturnType::Type(_, ty) if returns_result(ty) => ty,
                ReturnType::Type(_, ty) => {
                    return Err(syn::Error::new(ty.span(), NOT_RESULT));
                }
                ReturnType::Default => {
                    return Err(syn::Error::new(sig.ident.span(), NOT_RESULT));
                }
            };
            // Spanned at the return type: a missing `From<BulkheadFull>` points there.
            quote_spanned!(ret.span()=> ::bulkhead::__private::refusal_into_error(#full))
        }
    };

    let ItemFn { attrs, vis, sig, block } = &func;
    let permit = quote_spanned!(site=>
        let __bulkhead_permit = {
            static __BULKHEAD_CALL_SITE: ::bulkhead::__private::OnceLock<
                ::bulkhead::__private::Site,
            > = ::bulkhead::__private::OnceLock::new();
            let bulkhead: &'static ::bulkhead::__private::Site =
                __BULKHEAD_CALL_SITE.get_or_init(|| #resolve);
            match #acquire {
                ::core::result::Result::Ok(permit) => permit,
                ::core::result::Result::Err(#full) => return #on_refusal,
            }
        };
    );
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            #permit
            #block
        }
    })
}

const NOT_RESULT: &str = "#[bulkhead] without `fallback` needs a function returning \
    `Result<T, E>` where `E: From<bulkhead::BulkheadFull>` (a refusal returns \
    `Err(E::from(full))`); or name a fallback: #[bulkhead(name = \"...\", fallback = f)]";

/// Whether `ty` reads as a `Result`: a path whose last segment is `Result` or ends in it
/// (`Result<T, E>`, `io::Result<T>`, `anyhow::Result<T>`, `AppResult<T>`).
fn returns_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            path.path.segments.last().is_some_and(|last| last.ident.to_string().ends_with("Result"))
        }
        Type::Paren(inner) => returns_result(&inner.elem),
        Type::Group(inner) => returns_result(&inner.elem),
        _ => false,
    }
}

/// `fallback(args.., full)`, or `Self::fallback(self, args.., full)` in a method when the
/// fallback is a single name; `.await`ed in an async function.
fn fallback_call(func: &ItemFn, fallback: &Path, full: &Ident) -> syn::Result<TokenStream2> {
    let mut receiver = None;
    let mut forwarded = Vec::new();
    for input in &func.sig.inputs {
        match input {
            FnArg::Receiver(recv) => receiver = Some(recv.self_token),
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(ident) if ident.subpat.is_none() => {
                    let ident = &ident.ident;
                    forwarded.push(quote!(#ident));
                }
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "#[bulkhead] with `fallback` passes the arguments on to the fallback, \
                         so each must be a plain name (`x: T`), not a pattern",
                    ));
                }
            },
        }
    }
    let call = match (receiver, fallback.get_ident()) {
        (Some(this), Some(method)) => quote!(Self::#method(#this, #(#forwarded,)* #full)),
        (Some(this), None) => quote!(#fallback(#this, #(#forwarded,)* #full)),
        (None, _) => quote!(#fallback(#(#forwarded,)* #full)),
    };
    Ok(if func.sig.asyncness.is_some() { quote!(#call.await) } else { call })
}
