module signet.test/sunlight-reader

go 1.24.0

require filippo.io/sunlight v0.8.1

require (
	filippo.io/torchwood v0.8.0 // indirect
	github.com/google/certificate-transparency-go v1.3.2 // indirect
	golang.org/x/crypto v0.44.0 // indirect
	golang.org/x/mod v0.29.0 // indirect
	golang.org/x/sync v0.18.0 // indirect
)
