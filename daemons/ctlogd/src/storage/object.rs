//! [`ObjectStorage`]: a log's objects in an S3-compatible object store, through
//! the `object_store` crate (its S3 client, retries and request signing).

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as StorePath;
use object_store::{Attribute, Attributes, ObjectStore, PutOptions, PutPayload};

use super::{check_relative_path, ObjectKey, PutMode, Storage, StorageError};

/// Where an S3-compatible bucket is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    /// The endpoint URL (`https://s3.example.net`, `http://127.0.0.1:7070`).
    pub endpoint: String,
    /// The bucket name (path-style requests: the bucket is not in the host name).
    pub bucket: String,
    /// The region the request signatures name (`us-east-1` for most servers).
    pub region: String,
    /// The access key ID.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// A key prefix for this log's objects (several logs may share a bucket);
    /// empty for the bucket's root.
    pub prefix: String,
    /// Whether a plain `http://` endpoint is allowed (test servers, a local
    /// gateway); off for anything crossing a network.
    pub allow_http: bool,
}

/// A log's objects in an object store. Writes carry the `Cache-Control` and
/// `Content-Type` of [`ObjectKey`], so the bucket can be served directly.
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    description: String,
}

impl ObjectStorage {
    /// An S3-compatible bucket as [`S3Config`] describes it.
    pub fn s3(config: &S3Config) -> Result<Self, StorageError> {
        if !config.prefix.is_empty() {
            check_relative_path(&config.prefix).map_err(|_| StorageError::Config("bad prefix".into()))?;
        }
        let store = AmazonS3Builder::new()
            .with_endpoint(&config.endpoint)
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_access_key_id(&config.access_key_id)
            .with_secret_access_key(&config.secret_access_key)
            .with_allow_http(config.allow_http)
            .with_virtual_hosted_style_request(false)
            .build()
            .map_err(|e| StorageError::Config(e.to_string()))?;
        let description = format!("s3 {}/{}/{}", config.endpoint, config.bucket, config.prefix);
        Ok(Self::new(Arc::new(store), &config.prefix, description))
    }

    /// Any [`ObjectStore`], with this log's objects under `prefix`.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, description: String) -> Self {
        Self { store, prefix: prefix.trim_end_matches('/').to_string(), description }
    }

    fn location(&self, key: &ObjectKey) -> Result<StorePath, StorageError> {
        let rel = key.path();
        check_relative_path(&rel)?;
        let full = if self.prefix.is_empty() { rel } else { format!("{}/{rel}", self.prefix) };
        StorePath::parse(&full).map_err(|_| StorageError::BadPath(full))
    }

    async fn put_inner(&self, key: ObjectKey, data: Bytes, mode: PutMode) -> Result<(), StorageError> {
        let location = self.location(&key)?;
        if mode == PutMode::Immutable && self.head(&location).await? {
            return Ok(());
        }
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::CacheControl, key.cache_control().into());
        attributes.insert(Attribute::ContentType, key.content_type().into());
        let opts = PutOptions { attributes, ..PutOptions::default() };
        self.store.put_opts(&location, PutPayload::from_bytes(data), opts).await?;
        Ok(())
    }

    async fn get_inner(&self, key: ObjectKey) -> Result<Option<Bytes>, StorageError> {
        let location = self.location(&key)?;
        match self.store.get(&location).await {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn head(&self, location: &StorePath) -> Result<bool, StorageError> {
        match self.store.head(location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl Storage for ObjectStorage {
    fn put(&self, key: ObjectKey, data: Bytes, mode: PutMode) -> BoxFuture<'_, Result<(), StorageError>> {
        self.put_inner(key, data, mode).boxed()
    }

    fn get(&self, key: ObjectKey) -> BoxFuture<'_, Result<Option<Bytes>, StorageError>> {
        self.get_inner(key).boxed()
    }

    fn exists(&self, key: ObjectKey) -> BoxFuture<'_, Result<bool, StorageError>> {
        async move { self.head(&self.location(&key)?).await }.boxed()
    }

    fn partials(&self, key: ObjectKey) -> BoxFuture<'_, Result<Vec<ObjectKey>, StorageError>> {
        async move {
            if !key.is_immutable() || key.with_width(1).is_none() {
                return Ok(Vec::new());
            }
            let mut dir = self.location(&key)?.to_string();
            dir.push_str(".p");
            let prefix = StorePath::parse(&dir).map_err(|_| StorageError::BadPath(dir))?;
            let listed: Vec<_> = self.store.list(Some(&prefix)).try_collect().await?;
            Ok(listed
                .iter()
                .filter_map(|m| m.location.filename().and_then(super::partial_width).and_then(|w| key.with_width(w)))
                .collect())
        }
        .boxed()
    }

    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, Result<(), StorageError>> {
        async move {
            match self.store.delete(&self.location(&key)?).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        .boxed()
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
