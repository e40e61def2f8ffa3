package testsvc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// daemon is a server process in its own process group (so signals reach
// whatever it forks), its output appended to a log file.
type daemon struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited and been reaped
}

// startDaemon starts bin with args, its output appended to logPath.
func startDaemon(logPath, bin string, args ...string) (*daemon, error) {
	return startDaemonEnv(logPath, nil, bin, args...)
}

// startDaemonEnv is startDaemon with env added to the environment.
func startDaemonEnv(logPath string, env []string, bin string, args ...string) (*daemon, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	d := &daemon{cmd: exec.Command(bin, args...), logPath: logPath, done: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = d.cmd.Wait()
		log.Close()
		close(d.done)
	}()
	return d, nil
}

// exited reports whether the process has ended.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// output is the log so far, for an error message.
func (d *daemon) output() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

// signal sends sig to the process group.
func (d *daemon) signal(sig syscall.Signal) { _ = syscall.Kill(-d.cmd.Process.Pid, sig) }

// stop ends the process: SIGCONT (it may be stopped), then stopGroup's
// SIGTERM and SIGKILL after 5 s; it returns once the process is reaped.
func (d *daemon) stop() {
	if d == nil || d.exited() {
		return
	}
	d.signal(syscall.SIGCONT)
	stopGroup(d.cmd, d.done)
}

// kill ends the process with SIGKILL and returns once it is reaped.
func (d *daemon) kill() {
	if d == nil || d.exited() {
		return
	}
	d.signal(syscall.SIGKILL)
	<-d.done
}
