//! Integration tests across real daemon processes.
