# Debian packages (cpack -G DEB): jobtrail-node for compute and login nodes, jobtrail-cli for
# operators' machines, with the Loki and Grafana provisioning files under /usr/share/jobtrail.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
install(FILES etc/jobtrail.yaml DESTINATION /etc/jobtrail COMPONENT node)
# plugstack.conf names the plugin by its path: where this build installs it (a Slurm under
# /opt/slurm looks in /opt/slurm/lib/slurm, Debian's in /usr/lib/<arch>/slurm-wlm).
file(READ etc/slurm/plugstack.conf.d/jobtrail.conf JOBTRAIL_PLUGSTACK)
if(JOBTRAIL_BUILD_SPANK)
  if(IS_ABSOLUTE "${JOBTRAIL_SPANK_INSTALL_DIR}")
    set(JOBTRAIL_PLUGIN_PATH "${JOBTRAIL_SPANK_INSTALL_DIR}/spank_jobtrail.so")
  else()
    set(JOBTRAIL_PLUGIN_PATH "${CPACK_PACKAGING_INSTALL_PREFIX}/${JOBTRAIL_SPANK_INSTALL_DIR}/spank_jobtrail.so")
  endif()
  string(REGEX REPLACE "\noptional [^ ]*spank_jobtrail.so" "\noptional ${JOBTRAIL_PLUGIN_PATH}" JOBTRAIL_PLUGSTACK
                       "${JOBTRAIL_PLUGSTACK}")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/packaging/plugstack.conf.d/jobtrail.conf "${JOBTRAIL_PLUGSTACK}")
install(FILES ${CMAKE_BINARY_DIR}/packaging/plugstack.conf.d/jobtrail.conf DESTINATION /etc/slurm/plugstack.conf.d
        COMPONENT node)
install(FILES etc/logrotate.d/jobtrail DESTINATION /etc/logrotate.d COMPONENT node)
install(FILES etc/tmpfiles.d/jobtrail.conf DESTINATION lib/tmpfiles.d COMPONENT node)
install(FILES etc/systemd/jobtrail-shipper.service etc/systemd/jobtrail-shipper.socket DESTINATION lib/systemd/system COMPONENT node)
install(FILES etc/slurm/slurm.conf.jobtrail docs/job-log-format.md README.md DESTINATION share/doc/jobtrail-node
        COMPONENT node)
install(DIRECTORY etc/loki etc/grafana DESTINATION share/jobtrail COMPONENT cli)
install(FILES README.md DESTINATION share/doc/jobtrail-cli COMPONENT cli)

# The plugin loads only into the Slurm major.minor it was built for: the version says which
# (0.1.0+slurm25.11), and the node package depends on Debian's libslurm only when built against
# Debian's headers. Built against a site's own Slurm (/opt/slurm), it Provides jobtrail-spank-slurm-
# <major.minor>, which the site's own Slurm packaging or its checks can name.
set(JOBTRAIL_PACKAGE_VERSION ${PROJECT_VERSION})
if(JOBTRAIL_BUILD_SPANK)
  set(JOBTRAIL_PACKAGE_VERSION "${PROJECT_VERSION}+slurm${Slurm_VERSION_MAJOR_MINOR}")
  if(SLURM_FROM_DEBIAN)
    execute_process(COMMAND dpkg-query -W -f=\${Version} libslurm-dev OUTPUT_VARIABLE SLURM_DEB_VERSION
                    RESULT_VARIABLE SLURM_DEB_RC ERROR_QUIET)
    execute_process(COMMAND sh -c "dpkg-query -W -f='\${Package}\\n' 'libslurm[0-9]*' | grep -v dev | head -1"
                    OUTPUT_VARIABLE SLURM_LIB_PACKAGE OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME jobtrail)
set(CPACK_PACKAGE_VERSION ${JOBTRAIL_PACKAGE_VERSION})
set(CPACK_PACKAGE_CONTACT "jobtrail maintainers <jobtrail@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Slurm job forensics for GPU clusters: kernel, prolog/epilog and NCCL logs in Loki")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL node cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)

set(CPACK_DEBIAN_NODE_PACKAGE_NAME jobtrail-node)
set(CPACK_COMPONENT_NODE_DESCRIPTION
    "jobtrail for Slurm nodes: SPANK plugin (NCCL debug policy, --trace-capture), prolog/epilog collectors, log shipper to Loki")
if(JOBTRAIL_BUILD_SPANK AND SLURM_FROM_DEBIAN AND SLURM_DEB_RC EQUAL 0 AND SLURM_LIB_PACKAGE)
  set(CPACK_DEBIAN_NODE_PACKAGE_DEPENDS "${SLURM_LIB_PACKAGE} (= ${SLURM_DEB_VERSION})")
  message(STATUS "jobtrail-node ${JOBTRAIL_PACKAGE_VERSION} will depend on ${SLURM_LIB_PACKAGE} (= ${SLURM_DEB_VERSION})")
elseif(JOBTRAIL_BUILD_SPANK)
  set(CPACK_DEBIAN_NODE_PACKAGE_PROVIDES "jobtrail-spank-slurm-${Slurm_VERSION_MAJOR_MINOR}")
  message(STATUS "jobtrail-node ${JOBTRAIL_PACKAGE_VERSION}: plugin for the Slurm under ${SLURM_PREFIX} (no "
                 "Debian libslurm dependency; Provides jobtrail-spank-slurm-${Slurm_VERSION_MAJOR_MINOR})")
else()
  message(STATUS "jobtrail-node ${JOBTRAIL_PACKAGE_VERSION}: without the SPANK plugin (JOBTRAIL_SPANK=OFF, or no Slurm found)")
endif()
set(CPACK_DEBIAN_NODE_PACKAGE_RECOMMENDS "logrotate")
set(CPACK_DEBIAN_NODE_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/node/conffiles ${PROJECT_SOURCE_DIR}/packaging/debian/node/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/node/prerm ${PROJECT_SOURCE_DIR}/packaging/debian/node/postrm)
set(CPACK_DEBIAN_NODE_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME jobtrail-cli)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "jobtrail admin CLI: a Slurm job's forensic bundle from Loki; Loki rules and Grafana dashboard")
include(CPack)
