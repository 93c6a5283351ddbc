//! [`JsonCodec`]: how a state's per-key value is written as JSON.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Serializes values of type `T` as JSON (the Redis engine's state format). Built by
/// [`ValueStateDescriptor::persistent`](super::ValueStateDescriptor::persistent).
pub struct JsonCodec<T> {
    pub(crate) ser: fn(&T) -> Result<String, String>,
    pub(crate) de: fn(&str) -> Result<T, String>,
}

impl<T> Clone for JsonCodec<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for JsonCodec<T> {}

impl<T> std::fmt::Debug for JsonCodec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonCodec")
    }
}

fn to_json<T: Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

fn from_json<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_str(s).map_err(|e| e.to_string())
}

impl<T: Serialize + DeserializeOwned> JsonCodec<T> {
    /// The codec of `T` (serde_json).
    pub const fn new() -> Self {
        JsonCodec {
            ser: to_json::<T>,
            de: from_json::<T>,
        }
    }
}

impl<T: Serialize + DeserializeOwned> Default for JsonCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}
