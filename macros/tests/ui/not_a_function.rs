use bulkhead::bulkhead;

#[bulkhead(name = "sber")]
struct Port;

trait Rates {
    #[bulkhead(name = "sber")]
    fn rates(&self) -> Result<f64, bulkhead::BulkheadFull>;
}

fn main() {}
