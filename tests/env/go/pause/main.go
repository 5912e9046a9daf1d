// pause: the process that holds a pod sandbox's namespaces open.
//
// It blocks until SIGTERM or SIGINT (exit 0) and, as PID 1 of a pod that
// shares its PID namespace, reaps every child that is reparented to it and
// exits (on SIGCHLD). It never writes to its filesystem, so it runs as any
// user. `pause -v` prints its name and exits.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("raygate-e2e pause 1")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", s)
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking; SIGCHLDs coalesce, so
// one signal may stand for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
