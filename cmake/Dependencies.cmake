# Every dependency comes from Debian's packages; nothing is downloaded at build time.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
# The spool keeps runs snappy-compressed, as the push sends them (its decoder is fuzzed).
find_package(Snappy REQUIRED)

if(NOT JOBTRAIL_FUZZ)
  find_package(Protobuf REQUIRED)
  find_package(CURL REQUIRED)
  find_package(spdlog REQUIRED)
  find_package(CLI11 REQUIRED)
  find_package(LibArchive REQUIRED)
  find_package(OpenSSL REQUIRED)
  # The shipper's journald source is optional: nodes without libsystemd still get the rest.
  pkg_check_modules(SYSTEMD IMPORTED_TARGET libsystemd)
  if(NOT SYSTEMD_FOUND)
    message(WARNING "jobtrail: libsystemd not found (apt install libsystemd-dev): jobtrail-shipper is built "
                    "WITHOUT its journald source; a config that enables it gets a warning at start")
  endif()
  if(JOBTRAIL_TESTS)
    find_package(Catch2 2 REQUIRED)
    pkg_check_modules(FUSE3 REQUIRED IMPORTED_TARGET fuse3)
  endif()
endif()
