package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// exitMonitor watches the runtime's exit dir, where conmon writes a file
// named by the container ID when a container's process exits, so that a
// container exiting by itself is reported stopped to the hooks (and through
// them to the NRI plugins) when it exits, not when it is next stopped or
// removed.
type exitMonitor struct {
	watcher *fsnotify.Watcher
	cancel  context.CancelFunc
	// done is closed when the event loop returned; handlers counts the
	// per-exit goroutines, which Stop waits for.
	done     chan struct{}
	handlers sync.WaitGroup
}

// startExitMonitor starts watching the exit dir and then handles the exit
// files already there for containers the server knows: watching first means
// no file written in between is missed (a duplicate is harmless).
func (s *Server) startExitMonitor() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("server: exit monitor: %w", err)
	}
	dir := s.runtime.ExitDir()
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("server: exit monitor: watch %s: %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &exitMonitor{watcher: w, cancel: cancel, done: make(chan struct{})}
	s.exits = m
	s.scanExits(ctx, m)
	go s.watchExits(ctx, m)
	return nil
}

// stopExitMonitor stops the watch and waits for exits being handled.
func (s *Server) stopExitMonitor() {
	m := s.exits
	if m == nil {
		return
	}
	m.cancel()
	_ = m.watcher.Close()
	<-m.done
	m.handlers.Wait()
}

func (s *Server) watchExits(ctx context.Context, m *exitMonitor) {
	defer close(m.done)
	for {
		select {
		case ev, ok := <-m.watcher.Events:
			if !ok {
				return
			}
			// conmon writes a temporary file and renames it to the ID (a
			// Create here); Write covers a runtime writing in place.
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) {
				s.exitSeen(ctx, m, filepath.Base(ev.Name))
			}
		case err, ok := <-m.watcher.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were dropped: the directory itself says who exited.
				s.scanExits(ctx, m)
				continue
			}
			s.log.WithError(err).Warn("exit monitor")
		}
	}
}

func (s *Server) scanExits(ctx context.Context, m *exitMonitor) {
	ents, err := os.ReadDir(s.runtime.ExitDir())
	if err != nil {
		s.log.WithError(err).Warn("exit monitor: cannot read the exit dir")
		return
	}
	for _, e := range ents {
		s.exitSeen(ctx, m, e.Name())
	}
}

// exitSeen handles the exit file of a known container in its own goroutine,
// because it waits for the container's lock, which a stop in progress holds
// for up to its timeout, and other exits must not wait behind that.
func (s *Server) exitSeen(ctx context.Context, m *exitMonitor, id string) {
	s.mu.RLock()
	c, ok := s.containers[id]
	s.mu.RUnlock()
	if !ok {
		// Not ours (yet), a conmon temporary file, or removed already.
		return
	}
	m.handlers.Add(1)
	go func() {
		defer m.handlers.Done()
		s.containerExited(ctx, c)
	}()
}

// containerExited records the exit and calls the StopContainer hook unless a
// stop or an earlier event did. It holds c.mu, never s.mu.
func (s *Server) containerExited(ctx context.Context, c *Container) {
	if after := s.containerExitedLocked(ctx, c); after != nil {
		after()
	}
}

func (s *Server) containerExitedLocked(ctx context.Context, c *Container) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	code, finished, ok := s.runtime.ExitCode(c.ID)
	if !ok {
		// Not complete yet (a later event follows) or the container was
		// removed while this waited for its lock.
		return nil
	}
	if c.stopHooked {
		return nil
	}
	c.setExited(code, finished)
	s.writeRecord("ctr", c.ID, c.record())
	s.log.WithField("id", c.ID).WithField("exit_code", code).Debug("container exited")
	return s.stopHookOnce(ctx, c)
}
