//! An async client with a response cache.

use std::collections::HashMap;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig};

use crate::client::Reply;
use crate::sync::{lock, Mutex};

/// A client that answers from its cache when it can, and otherwise calls the downstream
/// through a bulkhead, waiting up to `max_wait` for a permit (the fallback after that).
#[derive(Debug)]
pub struct AsyncClient {
    bulkhead: Bulkhead,
    cache: Mutex<HashMap<String, String>>,
}

impl AsyncClient {
    pub fn new(limit: usize, max_wait: Duration) -> AsyncClient {
        let config = BulkheadConfig::builder()
            .max_concurrent_calls(limit)
            .max_wait_duration(max_wait)
            .build()
            .expect("valid bulkhead config");
        AsyncClient {
            bulkhead: Bulkhead::new("async-client", config),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The cached answer for `key`, or a fresh one, or the fallback.
    #[cfg(not(feature = "bug-lock-held-across-await"))]
    pub async fn get(&self, key: &str) -> Reply {
        if let Some(hit) = lock(&self.cache).get(key) {
            return Reply::Fresh(hit.clone());
        }
        // The cache guard is gone: waiting for a permit holds no lock.
        self.refresh(key).await
    }

    /// SEEDED BUG: the cache guard lives across the `.await`. A caller waiting for a permit
    /// holds the cache while the permit holder (a `refresh`) needs it to store its answer:
    /// each waits for the other until the waiter's deadline passes.
    #[cfg(feature = "bug-lock-held-across-await")]
    pub async fn get(&self, key: &str) -> Reply {
        let mut cache = lock(&self.cache);
        if let Some(hit) = cache.get(key) {
            return Reply::Fresh(hit.clone());
        }
        let Ok(permit) = self.bulkhead.acquire_async().await else {
            return Reply::Fallback;
        };
        let answer = format!("{key} from the downstream");
        cache.insert(key.to_owned(), answer.clone());
        drop(permit);
        Reply::Fresh(answer)
    }

    /// Fetches `key` from the downstream and caches it; the fallback if refused.
    pub async fn refresh(&self, key: &str) -> Reply {
        let Ok(permit) = self.bulkhead.acquire_async().await else {
            return Reply::Fallback;
        };
        let answer = format!("{key} from the downstream");
        lock(&self.cache).insert(key.to_owned(), answer.clone());
        drop(permit);
        Reply::Fresh(answer)
    }

    /// The bulkhead, for its metrics.
    pub fn bulkhead(&self) -> &Bulkhead {
        &self.bulkhead
    }
}
