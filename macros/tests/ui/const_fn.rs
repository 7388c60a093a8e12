use bulkhead::{bulkhead, BulkheadFull};

struct Unavailable;
impl From<BulkheadFull> for Unavailable {
    fn from(_: BulkheadFull) -> Self {
        Unavailable
    }
}

#[bulkhead(name = "sber")]
const fn rates() -> Result<u32, Unavailable> {
    Ok(1)
}

fn main() {}
