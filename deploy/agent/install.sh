#!/usr/bin/env bash
# Installs the Tickmark host agent as a systemd service, or removes it (--uninstall).
#
#   sudo deploy/agent/install.sh --engine wss://NODE --token tmkreg_…       install (or upgrade) and start
#   sudo deploy/agent/install.sh --uninstall [--force] [--keep-state]        stop and remove
#
# What it writes (every path under --root, default /, so that tests can install into a throwaway
# folder; systemctl, useradd and userdel are called as $SYSTEMCTL, $USERADD and $USERDEL when set):
#   /opt/tickmark-agent/tickmark-agent.jar        the agent (0644)
#   /etc/tickmark-agent/agent.env                 engine URL and registration token (0640 root:tickmark-agent)
#   /etc/systemd/system/tickmark-agent.service    the unit (0644)
#   /var/lib/tickmark-agent/                      the state folder: key, host credential, rentals (0700)
# and the system user and group tickmark-agent (in the docker group where there is one).
set -euo pipefail

NAME=tickmark-agent
UNIT=$NAME.service
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat <<EOF
Usage: $0 --engine URL [--engine URL…] [--token TOKEN] [--jar PATH|URL] [--java PATH] [--root DIR] [--no-start] [--insecure] [--ca FILE]
       $0 --uninstall [--force] [--keep-state] [--root DIR]

  --engine URL    a node, wss://host[:port] (the agent refuses ws:// off loopback); repeat it for several
                  (the agent fails over)
  --token TOKEN   the registration token (tmkreg_…, 'tickmark host token'); needed for the first start only
  --jar PATH|URL  the agent jar (default: agent/target/tickmark-agent.jar of this checkout, as Maven builds it)
  --java PATH     the Java 17+ to run it with (default: java on the PATH)
  --root DIR      install under DIR instead of / (tests)
  --no-start      install and enable, do not (re)start
  --insecure      accept a plain ws:// engine off loopback (the credential then travels in clear text)
  --ca FILE       a PEM bundle of the CAs the agent trusts for wss:// instead of the system trust store,
                  copied to /etc/tickmark-agent/ca.pem (a reinstall without --ca keeps the one copied before)
  --uninstall     stop the service (the agent stops its rentals: SIGTERM, grace period) and remove it all;
                  refused while rentals run, unless --force: drain the host first ('tickmark host drain HOST')
  --keep-state    with --uninstall: keep /var/lib/tickmark-agent (the host's key and credential)
EOF
}

die() {
  echo "install.sh: $*" >&2
  exit 1
}

ROOT=/
ENGINES=()
TOKEN=""
JAR=""
JAVA=""
UNINSTALL=0
FORCE=0
KEEP_STATE=0
START=1
INSECURE=0
CA=""
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) [ $# -ge 2 ] || die "--engine needs a URL"; ENGINES+=("$2"); shift 2 ;;
    --token) [ $# -ge 2 ] || die "--token needs a value"; TOKEN=$2; shift 2 ;;
    --jar) [ $# -ge 2 ] || die "--jar needs a path or URL"; JAR=$2; shift 2 ;;
    --java) [ $# -ge 2 ] || die "--java needs a path"; JAVA=$2; shift 2 ;;
    --root) [ $# -ge 2 ] || die "--root needs a folder"; ROOT=$2; shift 2 ;;
    --no-start) START=0; shift ;;
    --insecure) INSECURE=1; shift ;;
    --ca) [ $# -ge 2 ] || die "--ca needs a file"; CA=$2; shift 2 ;;
    --uninstall) UNINSTALL=1; shift ;;
    --force) FORCE=1; shift ;;
    --keep-state) KEEP_STATE=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done

ROOT=${ROOT%/}
SYSTEMCTL=${SYSTEMCTL:-systemctl}
USERADD=${USERADD:-useradd}
USERDEL=${USERDEL:-userdel}
# useradd/userdel work on another root's /etc/passwd with --root
ROOT_FLAG=()
[ -n "$ROOT" ] && ROOT_FLAG=(--root "$ROOT")

OPT_DIR=/opt/$NAME
ETC_DIR=/etc/$NAME
ENV_FILE=$ETC_DIR/agent.env
CA_FILE=$ETC_DIR/ca.pem
UNIT_FILE=/etc/systemd/system/$UNIT
STATE_DIR=/var/lib/$NAME

# the uid or gid of NAME in the root's passwd or group file, or nothing
id_in() {
  awk -F: -v n="$NAME" '$1 == n { print $3; exit }' "$ROOT/etc/$1" 2>/dev/null || true
}

uninstall() {
  local running=()
  if [ -d "$ROOT$STATE_DIR/rentals" ]; then
    # a rental's scratch folder exists exactly while it runs
    for d in "$ROOT$STATE_DIR"/rentals/*/scratch; do
      [ -d "$d" ] && running+=("$(basename "$(dirname "$d")")")
    done
  fi
  if [ ${#running[@]} -gt 0 ] && [ $FORCE -eq 0 ]; then
    die "${#running[@]} rental(s) still run here (${running[*]}): drain the host first ('tickmark host drain HOST':" \
      "no new rentals, running ones go on to their end), then run this again; --force stops them now"
  fi
  echo "Stopping $UNIT (the agent stops its rentals and wipes their workspaces)"
  "$SYSTEMCTL" stop "$UNIT" || true
  "$SYSTEMCTL" disable "$UNIT" || true
  rm -f "$ROOT$UNIT_FILE"
  "$SYSTEMCTL" daemon-reload || true
  rm -rf "$ROOT$OPT_DIR" "$ROOT$ETC_DIR"
  if [ $KEEP_STATE -eq 0 ]; then
    rm -rf "$ROOT$STATE_DIR"
  else
    echo "Kept $STATE_DIR (the host's key and credential: a reinstall needs no new token)"
  fi
  if [ -n "$(id_in passwd)" ]; then
    "$USERDEL" "${ROOT_FLAG[@]}" "$NAME" || echo "install.sh: could not remove the user $NAME" >&2
  fi
  echo "Removed the Tickmark agent"
}

if [ $UNINSTALL -eq 1 ]; then
  uninstall
  exit 0
fi

[ ${#ENGINES[@]} -gt 0 ] || { usage >&2; exit 2; }
for e in "${ENGINES[@]}"; do
  case "$e" in
    ws://* | wss://* | http://* | https://*) ;;
    *) die "not an engine URL: $e" ;;
  esac
  case "$e" in *[[:space:]\"\'\\\$\`]*) die "not an engine URL: $e" ;; esac
  # the agent refuses plain ws:// off loopback (its credential would travel in clear text): say so
  # now rather than have systemd restart a refused agent for ever
  case "$e" in
    ws://* | http://*)
      hostport=${e#*://}
      hostport=${hostport%%/*}
      case "$hostport" in
        localhost | localhost:* | 127.* | "[::1]" | "[::1]:"*) ;;
        *) [ "$INSECURE" = 1 ] || die "$e is plain ws:// off loopback: use wss:// (TLS), or --insecure to send the credential in clear text" ;;
      esac
      ;;
  esac
done
ENGINE=$(IFS=,; echo "${ENGINES[*]}")
INSECURE_FLAG=""
[ "$INSECURE" = 1 ] && INSECURE_FLAG=" --insecure"
case "$TOKEN" in *[!A-Za-z0-9_.-]*) die "not a registration token: $TOKEN" ;; esac
if [ -n "$CA" ]; then
  [ -f "$CA" ] || die "no CA bundle at $CA"
  grep -q -- "-----BEGIN CERTIFICATE-----" "$CA" || die "$CA holds no PEM certificate (BEGIN CERTIFICATE)"
fi
# a reinstall keeps the token written before (spent or not: the agent uses its credential once it has one)
OLD_TOKEN=""
if [ -z "$TOKEN" ] && [ -f "$ROOT$ENV_FILE" ]; then
  OLD_TOKEN=$(sed -n 's/^TICKMARK_AGENT_TOKEN=//p' "$ROOT$ENV_FILE")
fi
if [ -z "$TOKEN$OLD_TOKEN" ] && [ ! -f "$ROOT$STATE_DIR/host-credential" ]; then
  die "no host credential in $STATE_DIR yet: the first install needs --token (tickmark host token --region …)"
fi

if [ -z "$JAVA" ]; then JAVA=$(command -v java || true); fi
[ -n "$JAVA" ] && [ -x "$JAVA" ] || die "no java: install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless) or give --java"
case "$JAVA" in /*) ;; *) die "--java must be an absolute path" ;; esac

[ -n "$JAR" ] || JAR=$SCRIPT_DIR/../../agent/target/$NAME.jar
TMP_JAR=""
case "$JAR" in
  http://* | https://*)
    TMP_JAR=$(mktemp)
    trap 'rm -f "$TMP_JAR"' EXIT
    if command -v curl >/dev/null 2>&1; then curl -fsSL -o "$TMP_JAR" "$JAR" || die "cannot download $JAR"
    elif command -v wget >/dev/null 2>&1; then wget -q -O "$TMP_JAR" "$JAR" || die "cannot download $JAR"
    else die "neither curl nor wget to download $JAR"; fi
    JAR=$TMP_JAR
    ;;
esac
[ -f "$JAR" ] || die "no agent jar at $JAR (build it: mvn -B -pl wire,agent package -DskipTests)"

# the system user: no login, its home the state folder
if [ -z "$(id_in passwd)" ]; then
  echo "Creating the system user $NAME"
  "$USERADD" "${ROOT_FLAG[@]}" --system --user-group --home-dir "$STATE_DIR" --no-create-home \
    --shell /usr/sbin/nologin "$NAME"
fi
UID_=$(id_in passwd)
GID_=$(id_in group)
[ -n "$UID_" ] && [ -n "$GID_" ] || die "the user $NAME was not created"
# rentals run in docker: the agent needs its socket (as good as root on this machine: see the provider guide)
GROUPS_LINE=""
if awk -F: '$1 == "docker" { found = 1 } END { exit !found }' "$ROOT/etc/group" 2>/dev/null; then
  GROUPS_LINE="SupplementaryGroups=docker"
else
  echo "install.sh: no docker group on this machine: install Docker (apt-get install docker.io) for rentals to run" >&2
fi

install -d -m 0755 "$ROOT$OPT_DIR" "$ROOT/etc/systemd/system"
install -m 0644 "$JAR" "$ROOT$OPT_DIR/$NAME.jar"

# the env file: readable by root and the service's group only (it holds the token)
install -d -m 0750 "$ROOT$ETC_DIR"
chgrp "$GID_" "$ROOT$ETC_DIR"
umask 077
{
  echo "# Written by deploy/agent/install.sh. The token is spent at the first start; the host credential"
  echo "# in $STATE_DIR is used from then on."
  echo "TICKMARK_AGENT_ENGINE=$ENGINE"
  echo "TICKMARK_AGENT_TOKEN=${TOKEN:-$OLD_TOKEN}"
} >"$ROOT$ENV_FILE.tmp"
chmod 0640 "$ROOT$ENV_FILE.tmp"
chgrp "$GID_" "$ROOT$ENV_FILE.tmp"
mv -f "$ROOT$ENV_FILE.tmp" "$ROOT$ENV_FILE"
umask 022

# the CA bundle is public (certificates only): world-readable like /etc/ssl/certs
[ -n "$CA" ] && install -m 0644 "$CA" "$ROOT$CA_FILE"
CA_FLAG=""
[ -f "$ROOT$CA_FILE" ] && CA_FLAG=" --ca $CA_FILE"

install -d -m 0700 "$ROOT$STATE_DIR"
chown "$UID_:$GID_" "$ROOT$STATE_DIR"

cat >"$ROOT$UNIT_FILE.tmp" <<EOF
# Written by deploy/agent/install.sh; 'install.sh --uninstall' removes it.
[Unit]
Description=Tickmark host agent
Wants=network-online.target
After=network-online.target docker.service

[Service]
Type=simple
User=$NAME
Group=$NAME
$GROUPS_LINE
EnvironmentFile=$ENV_FILE
ExecStart=$JAVA -jar $OPT_DIR/$NAME.jar --engine \${TICKMARK_AGENT_ENGINE} --state-dir $STATE_DIR$INSECURE_FLAG$CA_FLAG
# 2: bad usage, 3: refused by the node for good (spent or expired token, host removed): a restart cannot help
Restart=on-failure
RestartSec=5
RestartPreventExitStatus=2 3
SuccessExitStatus=143
# SIGTERM to the agent alone: it stops its rentals (docker stop, the grace period) and wipes their
# workspaces; its docker helpers must not be signalled before it, or it would take the containers for gone
KillMode=mixed
TimeoutStopSec=120
UMask=0077
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=$STATE_DIR
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
# no RestrictNamespaces: the sandbox runtime (bubblewrap) makes user namespaces
CapabilityBoundingSet=
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
EOF
chmod 0644 "$ROOT$UNIT_FILE.tmp"
mv -f "$ROOT$UNIT_FILE.tmp" "$ROOT$UNIT_FILE"

"$SYSTEMCTL" daemon-reload
"$SYSTEMCTL" enable "$UNIT"
if [ $START -eq 1 ]; then
  # a restart of a running agent stops its rentals: drain the host before upgrading it
  "$SYSTEMCTL" restart "$UNIT"
  echo "Started $UNIT: 'journalctl -u $NAME -f' shows its log"
else
  echo "Installed $UNIT (not started: systemctl start $UNIT)"
fi
