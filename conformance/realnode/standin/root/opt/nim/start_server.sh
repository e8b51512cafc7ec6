#!/bin/sh
# Stand-in for a NIM LLM image's own start script, its ENTRYPOINT (a command that replaces the entrypoint, such as
# nim-lws-options' worker command, execs it by this path). It does what the stand-in does for a container that
# names no command (standin-entrypoint): the NIM stand-in in multi-node mode, else a hold that says what it is.
echo "multinode box stand-in /opt/nim/start_server.sh: NIM's start script is not in the stand-in"
exec standin-entrypoint "$@"
