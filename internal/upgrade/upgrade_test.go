package upgrade_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/internal/upgrade"
)

var errCrash = errors.New("simulated crash")

// crashAfter stops a run right after step, leaving what a crash there
// would: the package does no cleanup on the way out.
func crashAfter(step upgrade.Step) upgrade.Options {
	return upgrade.Options{AfterStep: func(done upgrade.Step, _ string) error {
		if done == step {
			return errCrash
		}
		return nil
	}}
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

func expectContent(t *testing.T, name, want string) {
	t.Helper()
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(name), err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q, want %q", filepath.Base(name), got, want)
	}
}

func expectMissing(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists (%v), want it gone", filepath.Base(name), err)
	}
}

// installed sets up dest = "old" and a source holding "new".
func installed(t *testing.T) (source, dest string) {
	dir := t.TempDir()
	source, dest = filepath.Join(dir, "download", "ironbus"), filepath.Join(dir, "bin", "ironbus")
	for _, sub := range []string{"download", "bin"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, source, "new", 0o644)
	writeFile(t, dest, "old", 0o750)
	return source, dest
}

func TestUpgradeKeepsThePreviousBinary(t *testing.T) {
	source, dest := installed(t)
	var steps []upgrade.Step
	result, err := upgrade.Upgrade(source, dest, upgrade.Options{AfterStep: func(step upgrade.Step, _ string) error {
		steps = append(steps, step)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	paths := upgrade.PathsFor(dest)
	expectContent(t, dest, "new")
	expectContent(t, paths.Previous, "old")
	expectMissing(t, paths.New)
	if result.Previous != paths.Previous || result.Bytes != 3 {
		t.Errorf("result %+v", result)
	}
	if want := []upgrade.Step{upgrade.StepStage, upgrade.StepKeep, upgrade.StepSwap}; !equalSteps(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}
	if info, err := os.Stat(dest); err != nil || info.Mode().Perm() != 0o750 {
		t.Errorf("installed mode %v (%v), want the replaced binary's 0750", info.Mode().Perm(), err)
	}
}

func TestUpgradeFirstInstall(t *testing.T) {
	source, dest := installed(t)
	if err := os.Remove(dest); err != nil {
		t.Fatal(err)
	}
	result, err := upgrade.Upgrade(source, dest, upgrade.Options{})
	if err != nil {
		t.Fatal(err)
	}
	expectContent(t, dest, "new")
	expectMissing(t, upgrade.PathsFor(dest).Previous)
	if result.Previous != "" {
		t.Errorf("first install reports a previous binary %q", result.Previous)
	}
	if info, _ := os.Stat(dest); runtime.GOOS != "windows" && info.Mode().Perm() != 0o755 {
		t.Errorf("first install mode %v, want 0755", info.Mode().Perm())
	}
}

// TestUpgradeCrashAtEveryStep stops after each step: dest always holds a
// whole binary, old or new, and a rerun ends with dest new and previous
// old, whatever step the crash hit.
func TestUpgradeCrashAtEveryStep(t *testing.T) {
	for _, step := range []upgrade.Step{upgrade.StepStage, upgrade.StepKeep, upgrade.StepSwap} {
		t.Run(string(step), func(t *testing.T) {
			source, dest := installed(t)
			if _, err := upgrade.Upgrade(source, dest, crashAfter(step)); !errors.Is(err, errCrash) {
				t.Fatalf("run stopped with %v", err)
			}
			want := "old"
			if step == upgrade.StepSwap {
				want = "new"
			}
			expectContent(t, dest, want)
			if _, err := upgrade.Upgrade(source, dest, upgrade.Options{}); err != nil {
				t.Fatalf("rerun: %v", err)
			}
			expectContent(t, dest, "new")
			expectContent(t, upgrade.PathsFor(dest).Previous, "old")
		})
	}
}

func TestRollbackTwiceUndoesItself(t *testing.T) {
	source, dest := installed(t)
	if _, err := upgrade.Upgrade(source, dest, upgrade.Options{}); err != nil {
		t.Fatal(err)
	}
	paths := upgrade.PathsFor(dest)
	if _, err := upgrade.Rollback(dest, upgrade.Options{}); err != nil {
		t.Fatal(err)
	}
	expectContent(t, dest, "old")
	expectContent(t, paths.Previous, "new")
	expectMissing(t, paths.Rollback)
	if _, err := upgrade.Rollback(dest, upgrade.Options{}); err != nil {
		t.Fatal(err)
	}
	expectContent(t, dest, "new")
	expectContent(t, paths.Previous, "old")
}

// TestRollbackCrashAtEveryStep: after a crash at any step, dest holds a
// whole binary and one more rollback ends with dest old, previous new.
func TestRollbackCrashAtEveryStep(t *testing.T) {
	for _, step := range []upgrade.Step{upgrade.StepHold, upgrade.StepRestore, upgrade.StepKeep} {
		t.Run(string(step), func(t *testing.T) {
			source, dest := installed(t)
			if _, err := upgrade.Upgrade(source, dest, upgrade.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := upgrade.Rollback(dest, crashAfter(step)); !errors.Is(err, errCrash) {
				t.Fatalf("run stopped with %v", err)
			}
			want := "old"
			if step == upgrade.StepHold {
				want = "new"
			}
			expectContent(t, dest, want)
			if step == upgrade.StepRestore {
				// Between restore and keep an upgrade must wait.
				if _, err := upgrade.Upgrade(source, dest, upgrade.Options{}); !errors.Is(err, upgrade.ErrRollbackPending) {
					t.Fatalf("upgrade during a pending rollback: %v, want ErrRollbackPending", err)
				}
			}
			result, err := upgrade.Rollback(dest, upgrade.Options{})
			if err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if step != upgrade.StepKeep {
				paths := upgrade.PathsFor(dest)
				expectContent(t, dest, "old")
				expectContent(t, paths.Previous, "new")
				expectMissing(t, paths.Rollback)
				if result.Resumed != (step == upgrade.StepRestore) {
					t.Errorf("resumed = %v after a crash at %s", result.Resumed, step)
				}
			}
		})
	}
}

func TestRollbackWithoutPrevious(t *testing.T) {
	_, dest := installed(t)
	if _, err := upgrade.Rollback(dest, upgrade.Options{}); !errors.Is(err, upgrade.ErrNoPrevious) {
		t.Fatalf("rollback = %v, want ErrNoPrevious", err)
	}
	expectContent(t, dest, "old")
}

func TestUpgradeRefusesBadSources(t *testing.T) {
	source, dest := installed(t)
	if _, err := upgrade.Upgrade(dest, dest, upgrade.Options{}); !errors.Is(err, upgrade.ErrSameFile) {
		t.Errorf("upgrade onto itself = %v, want ErrSameFile", err)
	}
	if _, err := upgrade.Upgrade(source+".missing", dest, upgrade.Options{}); !errors.Is(err, upgrade.ErrNotBinary) {
		t.Errorf("missing source = %v, want ErrNotBinary", err)
	}
	if _, err := upgrade.Upgrade(filepath.Dir(source), dest, upgrade.Options{}); !errors.Is(err, upgrade.ErrNotBinary) {
		t.Errorf("directory source = %v, want ErrNotBinary", err)
	}
	expectContent(t, dest, "old")
}

func TestProbe(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in binaries are shell scripts")
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeFile(t, good, "#!/bin/sh\necho '{\"schema\":\"ironbus.cli.version.v1\",\"version\":\"v9.9.9\",\"os\":\"linux\",\"arch\":\"arm\",\"formats\":{\"data_dir\":2,\"segment\":1,\"frame\":1,\"body\":1}}'\n", 0o755)
	identity, err := upgrade.Probe(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	if identity.Version != "v9.9.9" || identity.Formats.DataDir != 2 || identity.Arch != "arm" {
		t.Errorf("identity %+v", identity)
	}
	for name, script := range map[string]string{
		"fails":    "#!/bin/sh\necho broken >&2\nexit 1\n",
		"not-json": "#!/bin/sh\necho hello\n",
	} {
		path := filepath.Join(dir, name)
		writeFile(t, path, script, 0o755)
		if _, err := upgrade.Probe(context.Background(), path); !errors.Is(err, upgrade.ErrNotBinary) {
			t.Errorf("%s: Probe = %v, want ErrNotBinary", name, err)
		}
	}
	garbage := filepath.Join(dir, "garbage")
	writeFile(t, garbage, "\x7fELF truncated", 0o755)
	if _, err := upgrade.Probe(context.Background(), garbage); !errors.Is(err, upgrade.ErrNotBinary) {
		t.Errorf("truncated ELF: Probe = %v, want ErrNotBinary", err)
	}
}

func equalSteps(a, b []upgrade.Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
