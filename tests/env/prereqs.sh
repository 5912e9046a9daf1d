# What the machine must have for tests/env, in one place, and the check of it, which takes
# well under a second when all is there: run before anything slow, so that a fresh machine
# learns in seconds what it lacks rather than after a 15-minute build.
#
#   prereqs_ensure <need...>     needs: env, nodes, build, or up (what `control-plane up` needs:
#                                env, nodes unless RAYGATE_REAL_NODES=0, build unless
#                                RAYGATE_SKIP_BUILD=1)
#
# Missing Debian packages are installed with apt-get when running as root (then checked again);
# otherwise, and for anything else missing, one line each says what and how to fix it, and the
# caller exits with PREREQS_EXIT (2: the machine lacks a prerequisite; nothing was started).
# Sourced after versions.sh (for RAYGATE_CACHE, RAYGATE_BIN_DIR) by tests/env/build,
# tests/env/control-plane, tests/env/dev, tests/run and .ci/run; tested by tests/env/test-prereqs.
# RAYGATE_PREREQS_EXTRA="tool:package ..." adds entries to every check (that test's knob).
# shellcheck shell=bash

# One line per tool: the needs it serves, the tool (a command on PATH, or an absolute path), its
# Debian package (-: not a Debian package on these machines; then the rest of the line says what
# to install), and what for. env: control-plane up itself (the network namespace, the control
# plane); nodes: its real kubelet nodes; build: tests/env/build, tests/env/images. Tools from the
# packages every Debian base has (coreutils, mount, tar, dpkg, libc-bin, mawk) are not listed;
# util-linux's are, as .ci/run always listed nsenter.
PREREQS='
env         ip          iproute2    the network namespace, its addresses and routes
env         ss          iproute2    port checks inside the namespace
env         sysctl      procps      forwarding and bridge netfilter inside the namespace
env,build   flock       util-linux  the state and cache locks
env         openssl     openssl     the environment CA and every certificate
env         curl        curl        health checks
env,build   jq          jq          JSON: Go module metadata, kubectl output
nodes       containerd  containerd  each real node container runtime
nodes       ctr         containerd  importing the locally built images
nodes       runc        runc        the OCI runtime containerd runs
nodes       /usr/lib/cni/bridge containernetworking-plugins the pod network (bridge, host-local, portmap)
nodes       iptables    iptables    kube-proxy Service rules
nodes       conntrack   conntrack   kube-proxy
nodes       nsenter     util-linux  containerd and the kubelets enter only the network namespace
nodes       pgrep       procps      control-plane node stop finds a node containers
build       mmdebstrap  mmdebstrap  the Ray image Debian rootfs
build       strip       binutils    raygate image (its binary without debug sections)
build       /etc/ssl/certs/ca-certificates.crt ca-certificates the CA bundle pip trusts while building the Ray image
build       go          -           Go >= 1.26 (go.dev/dl; GOTOOLCHAIN=local): builds the Go tools and the pause image
build       python3     -           CPython 3.10-3.12 with venv: the Ray venv and the image packer
build       cargo       -           Rust (rustup.rs): raygate binaries and its image
'
PREREQS_EXIT=2
# Free space for $RAYGATE_CACHE, in GiB. Cold (no release's kube-apiserver built yet), the builds
# fill up to about 30 GB (a cache with every supported release built: 29 GB, GOCACHE 20 of it,
# GOMODCACHE 4.5, binaries 2.8, the release target 1.6). Warm, the cache grows little; 10 GB is
# for a fresh clone's target/ (tests/run's three selections, several GB), another release's
# builds and the real nodes' containerd state. A caller that builds less sets its own cold need
# after sourcing this file (tests/env/dev: the demo's cache).
PREREQS_COLD_GB=30 PREREQS_WARM_GB=10

prereqs_say() { printf '[prereqs] %s\n' "$*" >&2; }

# "tool package reason" for every entry of the needs given ("all": RAYGATE_PREREQS_EXTRA's).
prereqs_entries() { # <need...>
  local needs=" $* " need tool pkg why n ok extra=() e
  read -ra extra <<<"${RAYGATE_PREREQS_EXTRA:-}"
  while read -r need tool pkg why; do
    [ -n "$need" ] || continue
    ok=0
    for n in ${need//,/ }; do [[ "$needs" == *" $n "* ]] && ok=1; done
    [ "$ok" = 1 ] && echo "$tool $pkg $why"
  done <<<"$PREREQS"
  for e in "${extra[@]}"; do echo "${e%%:*} ${e#*:} RAYGATE_PREREQS_EXTRA"; done
}

# PREREQS_PKGS: the Debian packages of the missing tools, each once; PREREQS_OTHER: a line for
# each missing tool that is no Debian package.
prereqs_scan() { # <need...>
  local tool pkg why
  PREREQS_PKGS=() PREREQS_OTHER=()
  while read -r tool pkg why; do
    if [ "${tool#/}" != "$tool" ]; then
      [ -e "$tool" ] && continue
    elif command -v "$tool" >/dev/null 2>&1; then
      continue
    fi
    if [ "$pkg" = - ]; then
      PREREQS_OTHER+=("$tool not found in PATH; install $why")
    elif [[ " ${PREREQS_PKGS[*]} " != *" $pkg "* ]]; then
      PREREQS_PKGS+=("$pkg")
    fi
  done < <(prereqs_entries "$@")
}

# Free space where $RAYGATE_CACHE is (or will be), against the cold or warm need.
prereqs_disk() {
  local dir=${RAYGATE_CACHE:?source versions.sh before prereqs.sh} need state avail
  while [ ! -d "$dir" ]; do
    case "$dir" in */*) dir=${dir%/*}; dir=${dir:-/} ;; *) dir=. ;; esac
  done
  if compgen -G "${RAYGATE_BIN_DIR:-$RAYGATE_CACHE/bin}/kube-apiserver-*/.stamp" >/dev/null; then
    need=$PREREQS_WARM_GB state=warm
  else
    need=$PREREQS_COLD_GB state=cold
  fi
  # df -P: one line per file system, the fourth field KiB available. If df fails, the build
  # tells soon enough.
  { read -r _ && read -r _ _ _ avail _; } < <(df -Pk "$dir" 2>/dev/null) || return 0
  avail=$((avail / 1048576))
  [ "$avail" -ge "$need" ] && return 0
  echo "disk: ${avail} GB free for the $state cache $RAYGATE_CACHE (on $dir), $need GB needed" \
    "(cold about $PREREQS_COLD_GB, warm $PREREQS_WARM_GB); free space there or set RAYGATE_CACHE to a larger disk"
}

prereqs_ensure() { # <need...>
  local needs=() n fails=()
  for n in "$@"; do
    case "$n" in
      up)
        needs+=(env)
        [ "${RAYGATE_REAL_NODES:-}" = 0 ] || needs+=(nodes)
        [ "${RAYGATE_SKIP_BUILD:-0}" = 1 ] || needs+=(build) ;;
      env|nodes|build) needs+=("$n") ;;
      *) prereqs_say "ERROR: prereqs_ensure: unknown need '$n'"; exit "$PREREQS_EXIT" ;;
    esac
  done
  local has=" ${needs[*]} "
  local root=0 apt=0
  [ "$EUID" = 0 ] && root=1
  command -v apt-get >/dev/null 2>&1 && apt=1

  prereqs_scan "${needs[@]}" all
  local note=''
  if [ "${#PREREQS_PKGS[@]}" -gt 0 ] && [ "$root" = 1 ] && [ "$apt" = 1 ]; then
    prereqs_say "installing missing Debian packages: ${PREREQS_PKGS[*]} (apt-get)"
    # Its output goes to stderr, so that a caller's stdout stays its own. Another apt-get
    # (unattended upgrades, a second run) may hold dpkg's lock for a while: wait for it.
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=120 \
             "${PREREQS_PKGS[@]}"; } >&2; then
      prereqs_say "apt-get failed (its output is above)"
    fi
    prereqs_scan "${needs[@]}" all
    note=' (still, after apt-get install)'
  fi
  if [ "${#PREREQS_PKGS[@]}" -gt 0 ]; then
    local cmd="apt-get install -y ${PREREQS_PKGS[*]}"
    [ "$root" = 1 ] || cmd="sudo $cmd"
    [ "$apt" = 1 ] || note+=' (Debian names; no apt-get on this machine)'
    fails+=("missing Debian packages: ${PREREQS_PKGS[*]}$note; install them with: $cmd")
  fi
  fails+=("${PREREQS_OTHER[@]}")

  if [[ "$has" == *" env "* ]]; then
    [ "$root" = 1 ] ||
      fails+=("not root: the environment needs root (network namespaces, mounts, cgroups); run it as root")
    if [ ! -e /proc/self/ns/net ]; then
      fails+=("network namespaces: no /proc/self/ns/net; a kernel with CONFIG_NET_NS is needed")
    elif [ "$root" = 1 ] && command -v unshare >/dev/null && ! unshare --net true 2>/dev/null; then
      fails+=("network namespaces: unshare --net fails as root (a container without CAP_SYS_ADMIN?); run on a VM or a privileged container")
    fi
    # setup_node_network sets net.bridge.bridge-nf-call-iptables in the namespace.
    if [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
      [ "$root" = 1 ] && command -v modprobe >/dev/null && modprobe br_netfilter 2>/dev/null
      [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] ||
        fails+=("bridge netfilter: no /proc/sys/net/bridge (module br_netfilter); load it: modprobe br_netfilter")
    fi
  fi
  if [[ "$has" == *" nodes "* ]]; then
    # containerd's snapshotter.
    if [[ "$(</proc/filesystems)" != *overlay* ]]; then
      [ "$root" = 1 ] && command -v modprobe >/dev/null && modprobe overlay 2>/dev/null
      [[ "$(</proc/filesystems)" == *overlay* ]] ||
        fails+=("overlayfs: not in /proc/filesystems (containerd's snapshotter); load it: modprobe overlay")
    fi
    # v2 (one hierarchy, cgroup.controllers at the top) or v1 (one mount per controller).
    if [ ! -f /sys/fs/cgroup/cgroup.controllers ] && ! compgen -G '/sys/fs/cgroup/*/cgroup.procs' >/dev/null; then
      fails+=("cgroups: none mounted at /sys/fs/cgroup (the kubelets and runc need v1 or v2); mount them, e.g. mount -t cgroup2 none /sys/fs/cgroup")
    fi
    # kube-proxy writes NAT rules in the namespace: tried in a new one, the host's are untouched.
    if [ "$root" = 1 ] && command -v iptables >/dev/null && command -v unshare >/dev/null &&
       ! unshare --net iptables -w 5 -t nat -S >/dev/null 2>&1; then
      fails+=("iptables: iptables -t nat -S fails in a new network namespace (kube-proxy's rules); load nf_tables (or ip_tables and iptable_nat), or switch: update-alternatives --set iptables /usr/sbin/iptables-legacy")
    fi
  fi
  if [[ "$has" == *" build "* ]]; then
    local disk; disk=$(prereqs_disk)
    [ -z "$disk" ] || fails+=("$disk")
  fi

  [ "${#fails[@]}" -gt 0 ] || return 0
  local f
  for f in "${fails[@]}"; do prereqs_say "$f"; done
  prereqs_say "ERROR: this machine lacks what the command needs (above); nothing was started"
  exit "$PREREQS_EXIT"
}
