package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/korvet/korvet/engine/index"
)

// KVRebuildState describes the online rebuilds of the index.
type KVRebuildState struct {
	Running  bool            `json:"running"`
	Progress RebuildProgress `json:"progress"`
	Last     time.Time       `json:"last,omitzero"` // end of the last one
	LastErr  string          `json:"last_error,omitempty"`
}

// RebuildState returns the state of online rebuilds.
func (k *KV) RebuildState() KVRebuildState {
	kv := k.live
	if kv == nil {
		return KVRebuildState{}
	}
	kv.rebuildMu.Lock()
	defer kv.rebuildMu.Unlock()
	return kv.rebuild
}

// StartRebuild starts RebuildOnline in the background; it fails when
// there is no index or a rebuild is running.
func (k *KV) StartRebuild() error {
	kv := k.live
	if kv == nil {
		return ErrKVDisabled
	}
	if err := kv.claimRebuild(); err != nil {
		return err
	}
	e := k.e
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_, _ = kv.rebuildOnline(e.bg)
	}()
	return nil
}

// claimRebuild marks an online rebuild as running, unless one is.
func (kv *kvIndex) claimRebuild() error {
	kv.rebuildMu.Lock()
	defer kv.rebuildMu.Unlock()
	if kv.rebuild.Running {
		return errors.New("an index rebuild is already running")
	}
	kv.rebuild.Running = true
	return nil
}

// rebuildOnline rebuilds the live index from the log while it keeps
// serving (StartRebuild runs it in the background, once claimed): it
// loads a fresh index next to it ({dir}.rebuild) up to the high
// watermarks, loads it again up to where the log got meanwhile, then
// swaps it in: appends and reads wait for the few milliseconds the swap
// takes, and the partitions catch up from the new checkpoints (reads wait
// for that, within their budget). Compaction waits until it is done.
func (kv *kvIndex) rebuildOnline(ctx context.Context) (res RebuildResult, err error) {
	defer func() {
		kv.rebuildMu.Lock()
		kv.rebuild.Running, kv.rebuild.Last, kv.rebuild.LastErr = false, time.Now(), ""
		if err != nil {
			kv.rebuild.LastErr = err.Error()
		}
		kv.rebuildMu.Unlock()
		if err != nil {
			kv.log.Warn("key index rebuild failed; the index in use is unchanged", "err", err)
		} else {
			kv.log.Info("key index rebuilt", "records", res.Records, "took", res.Elapsed)
		}
	}()
	kv.compactMu.Lock()
	defer kv.compactMu.Unlock()
	start := time.Now()
	dir := kv.opts.Dir
	tmp, old := dir+".rebuild", dir+".old"
	if err := os.RemoveAll(tmp); err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	nix, err := index.Open(tmp, index.Options{Bulk: true, Logger: kv.log})
	if err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	lastLog := time.Now()
	progress := func(p RebuildProgress) {
		kv.rebuildMu.Lock()
		kv.rebuild.Progress = p
		kv.rebuildMu.Unlock()
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			kv.log.Info("key index rebuild", "records", p.Records, "done", p.Done, "of", p.Total)
		}
	}
	kv.log.Info("key index rebuild started", "dir", tmp)
	res, err = kv.e.KV().Rebuild(ctx, nix, RebuildOptions{Progress: progress})
	if err == nil {
		// What came in meanwhile, so that the swap leaves little to catch up.
		var more RebuildResult
		more, err = kv.e.KV().Rebuild(ctx, nix, RebuildOptions{})
		res.Records += more.Records
	}
	if cerr := nix.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return res, fmt.Errorf("rebuild: %w", err)
	}

	kv.closeMu.Lock()
	err = kv.swap(dir, tmp, old)
	kv.closeMu.Unlock()
	kv.nudge()
	_ = os.RemoveAll(old)
	_ = os.RemoveAll(tmp)
	res.Elapsed = time.Since(start)
	return res, err
}

// swap replaces the open index with the one in tmp; kv.closeMu must be
// held exclusively. On failure it puts the old one back.
func (kv *kvIndex) swap(dir, tmp, old string) error {
	if kv.closed {
		return errKVClosed
	}
	opts := index.Options{CacheSize: kv.opts.CacheSize, Logger: kv.log}
	if err := kv.ix.Close(); err != nil {
		kv.log.Warn("close the replaced key index", "err", err)
	}
	_ = os.RemoveAll(old)
	err := os.Rename(dir, old)
	if err == nil {
		if err = os.Rename(tmp, dir); err != nil {
			_ = os.Rename(old, dir)
		}
	}
	ix, oerr := index.Open(dir, opts)
	if oerr != nil {
		kv.closed = true // nothing to serve from; a restart rebuilds
		return fmt.Errorf("rebuild: reopen the index: %w", oerr)
	}
	kv.ix = ix
	kv.gen++
	if err != nil {
		// The old index is back; its checkpoints still hold.
		return fmt.Errorf("rebuild: swap directories: %w", err)
	}
	// Every partition restarts from the new index's checkpoint.
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	for _, kt := range kv.topics {
		kt.mu.Lock()
		for _, kp := range kt.parts {
			kp.mu.Lock()
			next, ok, cerr := ix.Checkpoint(kt.t.id, kp.p.id)
			if !ok || cerr != nil {
				next = 0
			}
			kp.applied = next
			kp.advanced()
			if next < kp.p.kvTarget() {
				kp.setLagging()
			} else {
				kp.setReady()
			}
			kp.mu.Unlock()
		}
		kt.dirty.Store(true)
		kt.mu.Unlock()
	}
	return nil
}
