#!/bin/sh
# Open MPI's remote-shell agent for tests/test_multihost.py: "ssh HOST COMMAND" into a Linux
# network namespace standing in for another machine (mpirun --mca plm_rsh_agent THIS).
#
#   netns_rsh.sh [-options...] HOST COMMAND...
#
# FLUIDLITE_TEST_NETNS maps hosts to namespaces: "HOST=NETNS[=HOSTNAME] ...", space-separated
# (HOST as written in the hostfile; HOSTNAME, when given, is the "machine's" host name, set in a
# UTS namespace of its own so the two "machines" do not share one). Like a real ssh login, the
# command starts from a clean environment (only PATH, HOME, LANG): whatever the ranks need must
# be forwarded by the launcher (mpirun -x), as it must be between real machines.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;            # ssh options Open MPI may add (-x): meaningless here
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "netns_rsh.sh: usage: netns_rsh.sh HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
ns=""
name=""
for pair in $FLUIDLITE_TEST_NETNS; do
  case "$pair" in
    "$host="*)
      rest=${pair#*=}
      ns=${rest%%=*}
      case "$rest" in *=*) name=${rest#*=} ;; esac
      ;;
  esac
done
if [ -z "$ns" ]; then
  echo "netns_rsh.sh: no network namespace for host '$host' in FLUIDLITE_TEST_NETNS" >&2
  exit 255               # ssh's exit code for "could not connect"
fi
# ssh runs its arguments, joined by spaces, through the remote shell: so does this
if [ -n "$name" ]; then
  exec ip netns exec "$ns" env -i PATH="$PATH" HOME="${HOME:-/}" LANG="${LANG:-C.UTF-8}" \
    unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' netns_rsh "$name" "$*"
fi
exec ip netns exec "$ns" env -i PATH="$PATH" HOME="${HOME:-/}" LANG="${LANG:-C.UTF-8}" \
  sh -c "$*"
