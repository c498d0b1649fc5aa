# What runs in the labs (sourced by helpers.bash and cluster/cluster.bash): the build tree, or
# with JT_INSTALLED=1 the paths the Debian packages install (CI installs them and runs the same
# tests). The kmsg fixture is always the build's.
if [ -n "${JT_INSTALLED:-}" ]; then
    JT_PROLOG=/usr/sbin/jobtrail-prolog
    JT_EPILOG=/usr/sbin/jobtrail-epilog
    JT_SHIPPER=/usr/sbin/jobtrail-shipper
    JT_CLI=/usr/bin/jobtrail
    JT_PLUGIN=/usr/lib/$(gcc -print-multiarch)/slurm-wlm/spank_jobtrail.so
else
    JT_PROLOG=$JOBTRAIL_BUILD/prolog/jobtrail-prolog
    JT_EPILOG=$JOBTRAIL_BUILD/epilog/jobtrail-epilog
    JT_SHIPPER=$JOBTRAIL_BUILD/shipper/jobtrail-shipper
    JT_CLI=$JOBTRAIL_BUILD/cli/jobtrail
    JT_PLUGIN=$JOBTRAIL_BUILD/spank/spank_jobtrail.so
fi
# The plugin built for another Slurm than the build's (the test command's 25.11 lab).
if [ -n "${JT_SPANK_PLUGIN:-}" ]; then JT_PLUGIN=$JT_SPANK_PLUGIN; fi
