// sunlight-reader: a second, independent Static CT API reader for
// tests/ct/interop.sh, built on Sunlight's client library (filippo.io/sunlight).
//
// It fetches and verifies the log's checkpoint with the log's public key,
// reads every entry through the data tiles (each authenticated against the
// checkpoint's tree by the library), checks that each entry's leaf_index is
// its position, fetches every issuer the entries name (the library checks
// each one's SHA-256), and, for each SCT given (base64 TLS-encoded, one per
// line in the -scts file), checks its inclusion: the SCT's log ID, its
// leaf_index entry, timestamp and signature.
//
//	sunlight-reader -monitoring URL -key log.pem [-scts FILE]
//
// Prints "sunlight: N entries, M issuers, K SCTs verified at tree size N".
package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"strings"

	"filippo.io/sunlight"
)

func main() {
	monitoring := flag.String("monitoring", "", "static-ct-api monitoring prefix")
	keyFile := flag.String("key", "", "the log's public key, PEM")
	sctsFile := flag.String("scts", "", "a file of base64 SCTs (TLS encoding), one per line")
	flag.Parse()
	if err := run(*monitoring, *keyFile, *sctsFile); err != nil {
		fmt.Fprintln(os.Stderr, "sunlight-reader:", err)
		os.Exit(1)
	}
}

func run(monitoring, keyFile, sctsFile string) error {
	pemBytes, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return fmt.Errorf("%s: no PEM block", keyFile)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return err
	}
	client, err := sunlight.NewClient(&sunlight.ClientConfig{
		MonitoringPrefix: monitoring,
		PublicKey:        key,
		UserAgent:        "signet tests/ct/interop.sh (signet-tests@example.com)",
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	checkpoint, _, err := client.Checkpoint(ctx)
	if err != nil {
		return err
	}
	var n int64
	issuers := map[[32]byte]bool{}
	for i, entry := range client.Entries(ctx, checkpoint.Tree, 0) {
		if entry.LeafIndex != i {
			return fmt.Errorf("entry %d has leaf_index %d", i, entry.LeafIndex)
		}
		for _, fp := range entry.ChainFingerprints {
			if issuers[fp] {
				continue
			}
			if _, err := client.Issuer(ctx, fp); err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			issuers[fp] = true
		}
		n++
	}
	if err := client.Err(); err != nil {
		return err
	}
	if n != checkpoint.Tree.N {
		return fmt.Errorf("read %d entries, the checkpoint has %d", n, checkpoint.Tree.N)
	}
	scts := 0
	if sctsFile != "" {
		f, err := os.Open(sctsFile)
		if err != nil {
			return err
		}
		defer f.Close()
		lines := bufio.NewScanner(f)
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			if line == "" {
				continue
			}
			sct, err := base64.StdEncoding.DecodeString(line)
			if err != nil {
				return fmt.Errorf("SCT %d: %w", scts, err)
			}
			if _, _, err := client.CheckInclusion(ctx, checkpoint.Tree, sct); err != nil {
				return fmt.Errorf("SCT %d: %w", scts, err)
			}
			scts++
		}
		if err := lines.Err(); err != nil {
			return err
		}
	}
	fmt.Printf("sunlight: %d entries, %d issuers, %d SCTs verified at tree size %d\n", n, len(issuers), scts, checkpoint.Tree.N)
	return nil
}
