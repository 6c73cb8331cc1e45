// Package rawio is the project's one raw socket layer: the system calls it makes itself, on
// 64-bit Linux, where the standard library was measured slower on a goal (bench/RESULTS.md,
// "One way to move bytes"). Everything else, and every other system, uses package net.
//
// It has one socket type and one poller:
//
//   - Sock is a TCP or UDP socket made with system calls and kept out of the runtime's
//     netpoller. A reference count keeps its descriptor open while a call uses it, so a
//     Close from another goroutine cannot let the number be reused under a running call.
//   - Poll is an epoll set. A dispatching Poll (NewPoll) holds nonblocking TCP Socks; it is
//     nested in the runtime's netpoller, and its Loop wakes the goroutines waiting on its
//     sockets, or starts the one armed to run when a socket becomes readable. A worker's Poll
//     (NewWorkerPoll) holds blocking UDP Socks and is waited on by one worker in the kernel,
//     holding its P (Wait).
//
// The TCP side (ListenTCP, DialTCP, Pipe) serves the proxy's raw engine: it spares the calls
// package net makes per connection (fcntl, setsockopt, getsockname, EPOLL_CTL_DEL) and splices
// in bulk. The UDP side (ListenUDP, DialUDP, Receiver, Sender) serves the blocking workers of
// the DNS server and the UDP proxy: a thread blocked in recvmmsg is woken by the kernel alone,
// where Go's poller costs a park, a wake-up and a hand-over between threads per datagram.
//
// The cost of the UDP workers: a goroutine blocked in a raw system call keeps its P, and the
// runtime cannot stop it for the garbage collector until the call returns. Hence the receive
// timeout (RcvTimeout): the signal the runtime sends to preempt a goroutine makes a receive
// with SO_RCVTIMEO, and a Pause, return EINTR at once (signal(7)); the timeout bounds the wait
// if a signal is missed, and the worker then yields. And hence a program that runs such
// workers should add a P for each, so that the rest of the process keeps every CPU's. This
// package never changes GOMAXPROCS itself.
package rawio
