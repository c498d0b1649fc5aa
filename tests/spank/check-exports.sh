#!/bin/sh
# Fails if spank_jobtrail.so defines any dynamic symbol other than the slurm_spank_* callbacks
# and the plugin identity (plugin_name, plugin_type, plugin_version, spank_plugin_version).
set -eu
so=$1
defined=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
echo "exported:"; echo "$defined" | sed 's/^/  /'
bad=$(echo "$defined" | grep -vE '^(slurm_spank_[a-z_]+|plugin_name|plugin_type|plugin_version|spank_plugin_version)$' || true)
if [ -n "$bad" ]; then echo "unexpected exports:"; echo "$bad"; exit 1; fi
for need in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init; do
    echo "$defined" | grep -qx "$need" || { echo "missing export: $need"; exit 1; }
done
echo "ok"
