# Finds the Slurm whose headers the SPANK plugin is built against. A SPANK plugin loads only into
# the Slurm major.minor it was built for, so this is the site's Slurm, wherever it is installed:
#
#   -DSLURM_ROOT=/opt/slurm        (or the environment's SLURM_ROOT) its prefix: <root>/include/slurm
#   -DSLURM_INCLUDE_DIR=/x/include the directory that holds slurm/spank.h
#   -DCMAKE_PREFIX_PATH=/opt/slurm or Slurm's slurm.pc (pkg-config, PKG_CONFIG_PATH)
#   otherwise the system's (Debian's libslurm-dev: /usr/include/slurm)
#
# The first that names a place wins, and only that place is searched: a site's /opt/slurm must
# not lose to a distribution's headers that happen to be installed too.
#
# Sets Slurm_FOUND, SLURM_INCLUDE_DIR, Slurm_VERSION (major.minor.micro), Slurm_VERSION_MAJOR_MINOR
# (25.11), SLURM_VERSION_HEX, SLURM_PREFIX (the install prefix the headers belong to),
# SLURM_FROM_DEBIAN (the headers are Debian's libslurm-dev) and SLURM_FOUND_BY (how it was found).

if(NOT SLURM_ROOT AND DEFINED ENV{SLURM_ROOT})
  set(SLURM_ROOT "$ENV{SLURM_ROOT}")
endif()

set(_slurm_by "")
if(SLURM_INCLUDE_DIR)
  set(_slurm_by "SLURM_INCLUDE_DIR")
  if(NOT EXISTS "${SLURM_INCLUDE_DIR}/slurm/spank.h")
    message(FATAL_ERROR "SLURM_INCLUDE_DIR=${SLURM_INCLUDE_DIR} has no slurm/spank.h")
  endif()
elseif(SLURM_ROOT)
  set(_slurm_by "SLURM_ROOT")
  find_path(SLURM_INCLUDE_DIR slurm/spank.h PATHS "${SLURM_ROOT}/include" NO_DEFAULT_PATH)
  if(NOT SLURM_INCLUDE_DIR)
    message(FATAL_ERROR "SLURM_ROOT=${SLURM_ROOT} has no include/slurm/spank.h")
  endif()
else()
  # CMAKE_PREFIX_PATH first (find_path searches it before the system), then slurm.pc.
  find_path(SLURM_INCLUDE_DIR slurm/spank.h NO_SYSTEM_ENVIRONMENT_PATH NO_CMAKE_SYSTEM_PATH)
  if(SLURM_INCLUDE_DIR)
    set(_slurm_by "CMAKE_PREFIX_PATH")
  else()
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(_SLURM_PC QUIET slurm)
      if(_SLURM_PC_FOUND AND EXISTS "${_SLURM_PC_INCLUDEDIR}/slurm/spank.h")
        set(SLURM_INCLUDE_DIR "${_SLURM_PC_INCLUDEDIR}" CACHE PATH "Directory holding slurm/spank.h" FORCE)
        set(_slurm_by "slurm.pc")
      endif()
    endif()
    if(NOT SLURM_INCLUDE_DIR)
      find_path(SLURM_INCLUDE_DIR slurm/spank.h)
      if(SLURM_INCLUDE_DIR)
        set(_slurm_by "system")
      endif()
    endif()
  endif()
endif()

set(Slurm_FOUND FALSE)
if(SLURM_INCLUDE_DIR AND EXISTS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h")
  file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" _slurm_line REGEX "^#define SLURM_VERSION_NUMBER")
  string(REGEX MATCH "0x[0-9a-fA-F]+" SLURM_VERSION_HEX "${_slurm_line}")
  if(SLURM_VERSION_HEX)
    math(EXPR _slurm_dec "${SLURM_VERSION_HEX}")
    math(EXPR _slurm_major "(${_slurm_dec} >> 16) & 255")
    math(EXPR _slurm_minor "(${_slurm_dec} >> 8) & 255")
    math(EXPR _slurm_micro "${_slurm_dec} & 255")
    # Slurm numbers its releases YY.MM: 25.11, and 22.05 with its leading zero.
    if(_slurm_minor LESS 10)
      set(Slurm_VERSION_MAJOR_MINOR "${_slurm_major}.0${_slurm_minor}")
    else()
      set(Slurm_VERSION_MAJOR_MINOR "${_slurm_major}.${_slurm_minor}")
    endif()
    set(Slurm_VERSION "${Slurm_VERSION_MAJOR_MINOR}.${_slurm_micro}")
    get_filename_component(SLURM_PREFIX "${SLURM_INCLUDE_DIR}" DIRECTORY)
    set(SLURM_FROM_DEBIAN FALSE)
    if(SLURM_INCLUDE_DIR STREQUAL "/usr/include")
      execute_process(COMMAND dpkg-query -S /usr/include/slurm/spank.h OUTPUT_VARIABLE _slurm_owner
                      RESULT_VARIABLE _slurm_rc ERROR_QUIET)
      if(_slurm_rc EQUAL 0 AND _slurm_owner MATCHES "^libslurm-dev")
        set(SLURM_FROM_DEBIAN TRUE)
      endif()
    endif()
    set(SLURM_FOUND_BY "${_slurm_by}")
    set(Slurm_FOUND TRUE)
  endif()
endif()
