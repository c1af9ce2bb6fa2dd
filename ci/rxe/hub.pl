#!/usr/bin/perl
# Ethernet hub for three or more test-bed guests (ci/rxe/guests.sh).
# Usage: hub.pl HUB_SOCKET N SOCKET_DIR
# Every guest's qemu sends its frames as datagrams to the Unix socket
# HUB_SOCKET from its own socket SOCKET_DIR/gI.sock; each frame is passed on
# to all the other guests' sockets unchanged (broadcast and multicast
# included). Nothing leaves the host: no IP socket is opened.
#
# A Unix datagram socket queues only a few datagrams (net.unix.max_dgram_qlen,
# 10 by default), so a guest that reads slowly would lose frames: instead the
# hub keeps a queue per guest and retries, dropping only when a queue holds
# more than MAX_QUEUE frames (a guest that is gone or hung) or the guest's
# socket does not exist (not up yet, or powered off). Exits when its parent
# dies.
use strict;
use warnings;
use Socket;
use IO::Socket::UNIX;
use Errno qw(EAGAIN EWOULDBLOCK ENOBUFS);

my $MAX_QUEUE = 20000;
my ($path, $n, $dir) = @ARGV;
die "usage: hub.pl HUB_SOCKET N SOCKET_DIR\n" unless defined $dir;
unlink $path;
my $sock = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $path)
    or die "hub: cannot bind $path: $!\n";
setsockopt($sock, SOL_SOCKET, SO_RCVBUF, 4 << 20);
setsockopt($sock, SOL_SOCKET, SO_SNDBUF, 4 << 20);
my @peers = map { "$dir/g$_.sock" } 0 .. $n - 1;
my @addrs = map { pack_sockaddr_un($_) } @peers;
my @queue = map { [] } 0 .. $n - 1;
my $parent = getppid();
my $debug = $ENV{RXE_HUB_DEBUG};
my (@sent, @dropped, @recvd);

# Sends one frame to guest $i; returns 0 if it must wait (peer queue full).
sub put {
    my ($i, $frame) = @_;
    if (defined send($sock, $frame, MSG_DONTWAIT, $addrs[$i])) { $sent[$i]++; return 1 }
    return 0 if $! == EAGAIN || $! == EWOULDBLOCK || $! == ENOBUFS;
    $dropped[$i]++;
    warn "hub: send to g$i: $!\n" if $debug;
    return 1;    # no such socket (guest not up or gone): dropped
}

sub flush {
    my $i = shift;
    my $q = $queue[$i];
    while (@$q) {
        put($i, $q->[0]) or return;
        shift @$q;
    }
}

my $rin = '';
vec($rin, fileno($sock), 1) = 1;
my $last_check = time;
while (1) {
    my $waiting = grep { @$_ } @queue;
    # Queued frames: retry every millisecond (writability of an unconnected
    # datagram socket says nothing about the receiver's queue).
    my $ready = select(my $rout = $rin, undef, undef, $waiting ? 0.001 : 1.0);
    if (time != $last_check) {
        $last_check = time;
        exit 0 if getppid() != $parent;
        if ($debug) {
            warn sprintf("hub: g%d recvd %d sent %d dropped %d queued %d\n", $_,
                $recvd[$_] // 0, $sent[$_] // 0, $dropped[$_] // 0, scalar @{ $queue[$_] }) for 0 .. $#queue;
        }
    }
    flush($_) for grep { @{ $queue[$_] } } 0 .. $#queue;
    next unless $ready > 0;
    for (1 .. 64) {    # drain what is there, then look at the queues again
        my $from = recv($sock, my $frame, 65536, MSG_DONTWAIT);
        last unless defined $from;
        my $src = eval { unpack_sockaddr_un($from) } // '';
        if ($debug) { for my $i (0 .. $#peers) { $recvd[$i]++ if $peers[$i] eq $src } }
        for my $i (0 .. $#peers) {
            next if $peers[$i] eq $src;
            my $q = $queue[$i];
            if (@$q || !put($i, $frame)) {
                push @$q, $frame;
                shift @$q if @$q > $MAX_QUEUE;
            }
        }
    }
}
