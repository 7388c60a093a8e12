use bulkhead::bulkhead;

#[bulkhead(name = "sber")]
fn rates() -> f64 {
    1.0
}

#[bulkhead(name = "sber")]
async fn notify(_message: &str) {}

fn main() {}
