//! Identifiers (RFC 8555 §9.7.7, RFC 8738): what a certificate is for. Below
//! `problem` (a problem document may name one) and `types`, which re-exports
//! them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Defines a string-valued enum whose unknown values are kept as `Other`.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $( $(#[$doc:meta])* $variant:ident = $text:literal, )* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$doc])* $variant, )*
            /// A value this crate does not know, kept as sent.
            Other(String),
        }
        impl $name {
            /// The JSON string.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )*
                    $name::Other(s) => s,
                }
            }
        }
        impl From<&str> for $name {
            fn from(s: &str) -> $name {
                match s {
                    $( $text => $name::$variant, )*
                    other => $name::Other(other.to_owned()),
                }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                Ok($name::from(String::deserialize(deserializer)?.as_str()))
            }
        }
    };
}

pub(crate) use string_enum;

string_enum! {
    /// An identifier type.
    IdentifierType {
        /// A DNS name (RFC 8555 §9.7.7).
        Dns = "dns",
        /// An IP address (RFC 8738).
        Ip = "ip",
    }
}

/// An identifier (RFC 8555 §9.7.7, RFC 8738).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identifier {
    /// The type.
    #[serde(rename = "type")]
    pub kind: IdentifierType,
    /// The value: a DNS name or an IP address in text form.
    pub value: String,
}

impl Identifier {
    /// A `dns` identifier.
    pub fn dns(name: impl Into<String>) -> Identifier {
        Identifier { kind: IdentifierType::Dns, value: name.into() }
    }

    /// An `ip` identifier.
    pub fn ip(address: impl Into<String>) -> Identifier {
        Identifier { kind: IdentifierType::Ip, value: address.into() }
    }
}
