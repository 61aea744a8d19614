//! Garbage decision and expiry sweep (to be filled).
