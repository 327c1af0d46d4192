/// A fresh time-ordered id (UUIDv7): sorting ids sorts by creation time.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
