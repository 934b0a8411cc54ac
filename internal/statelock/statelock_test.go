package statelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const childEnv = "STATELOCK_TEST_HOLD"

// Every test runs in parallel: each locks a file in a directory of its
// own (flock is per open file), and most of their time is waiting on
// the poll and on each other.

// TestMain: in the child, take the lock, say so, and hold it until stdin
// closes or the process is killed.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		l, err := Acquire(context.Background(), path, time.Second)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSecondHolderWaitsThenNamesTheFirst(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), Name)
	a, err := Acquire(t.Context(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	wait := 300 * time.Millisecond
	_, err = Acquire(t.Context(), path, wait)
	var he *HeldError
	if !errors.As(err, &he) || he.PID != os.Getpid() || he.Waited < wait {
		t.Fatalf("second acquire: %v", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) || !strings.Contains(err.Error(), path) {
		t.Errorf("error does not name the holder and the file: %v", err)
	}
	t.Log(err)
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file left after release: %v", err)
	}
	b, err := Acquire(t.Context(), path, 0)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.Release()
}

// TestManyWaiters: runs that queue for the lock while holders come and go
// (each removing the file) never hold it at the same time.
func TestManyWaiters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), Name)
	var mu sync.Mutex
	holders, most := 0, 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				l, err := Acquire(t.Context(), path, 30*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holders++
				most = max(most, holders)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				holders--
				mu.Unlock()
				if err := l.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders at once", most)
	}
}

func TestWaiterGetsTheLockWhenReleased(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), Name)
	a, err := Acquire(t.Context(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		a.Release()
	}()
	b, err := Acquire(t.Context(), path, 30*time.Second)
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	defer b.Release()
	pid, _ := os.ReadFile(path)
	if strings.TrimSpace(string(pid)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("lock file holds %q", pid)
	}
}

func TestContextEndsTheWait(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), Name)
	a, err := Acquire(t.Context(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = Acquire(ctx, path, time.Hour)
	var he *HeldError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &he) {
		t.Errorf("got %v", err)
	}
}

// TestTwoProcesses: the holder is another process; its pid is named, and
// when it dies (SIGKILL, no cleanup) the kernel frees the lock.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), Name)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		cmd.Process.Kill()
		t.Fatalf("child: %q", line)
	}
	_, err = Acquire(t.Context(), path, 200*time.Millisecond)
	var he *HeldError
	if !errors.As(err, &he) || he.PID != cmd.Process.Pid {
		t.Errorf("while the child holds it: %v (child pid %d)", err, cmd.Process.Pid)
	}
	t.Log(err)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	l, err := Acquire(t.Context(), path, 5*time.Second)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}

func TestRefusesPlantedLockFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, dir} {
		if l, err := Acquire(t.Context(), p, 0); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", p, err)
			l.Release()
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); err == nil {
		t.Error("the symlink was followed")
	}
}
