//! signetctl: the Signet admin CLI.
