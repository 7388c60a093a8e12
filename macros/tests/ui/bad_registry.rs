use bulkhead::{bulkhead, BulkheadFull};

struct Unavailable;
impl From<BulkheadFull> for Unavailable {
    fn from(_: BulkheadFull) -> Self {
        Unavailable
    }
}

static NOT_A_REGISTRY: u32 = 7;

#[bulkhead(name = "sber", registry = NOT_A_REGISTRY)]
fn rates() -> Result<f64, Unavailable> {
    Ok(1.0)
}

fn main() {}
