use bulkhead::{bulkhead, BulkheadFull};

struct Unavailable;
impl From<BulkheadFull> for Unavailable {
    fn from(_: BulkheadFull) -> Self {
        Unavailable
    }
}

#[bulkhead(name = "sber", max_wait = 100)]
fn unknown() -> Result<f64, Unavailable> {
    Ok(1.0)
}

#[bulkhead(name = sber)]
fn name_not_a_string() -> Result<f64, Unavailable> {
    Ok(1.0)
}

#[bulkhead(name = "")]
fn empty_name() -> Result<f64, Unavailable> {
    Ok(1.0)
}

#[bulkhead(name = "sber", name = "bank")]
fn name_twice() -> Result<f64, Unavailable> {
    Ok(1.0)
}

#[bulkhead(name = "sber", fallback)]
fn fallback_without_value() -> Result<f64, Unavailable> {
    Ok(1.0)
}

fn main() {}
