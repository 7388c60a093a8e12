use bulkhead::bulkhead;

#[derive(Debug)]
enum PortError {
    Declined,
}

#[bulkhead(name = "sber")]
fn rates() -> Result<f64, PortError> {
    Err(PortError::Declined)
}

fn main() {}
