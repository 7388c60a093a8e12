use bulkhead::{bulkhead, BulkheadFull};

struct Unavailable;
impl From<BulkheadFull> for Unavailable {
    fn from(_: BulkheadFull) -> Self {
        Unavailable
    }
}

#[bulkhead]
fn rates() -> Result<f64, Unavailable> {
    Ok(1.0)
}

#[bulkhead(registry = bulkhead::BulkheadRegistry::global())]
fn balance() -> Result<f64, Unavailable> {
    Ok(1.0)
}

fn main() {}
