//! signd: the only process that touches private keys.
