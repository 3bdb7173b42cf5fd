# Fails when a file of layer LAYER includes a project header from a folder outside
# ALLOWED (see cmake/HvdLayers.cmake). Run as:
#   cmake -DLAYER=<name> -DALLOWED=<dir|dir...> -DFILES=<file listing paths>
#         -DROOT=<source root> -P check_layer.cmake
# Only quoted includes are checked: <...> names system and third-party headers.
string(REPLACE "|" ";" ALLOWED "${ALLOWED}")
file(STRINGS ${FILES} files)
set(violations "")
foreach(f ${files})
  if(f STREQUAL "")
    continue()
  endif()
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  file(RELATIVE_PATH rel ${ROOT} ${f})
  foreach(line ${lines})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" header "${line}")
    get_filename_component(dir ${header} DIRECTORY)
    list(FIND ALLOWED "${dir}" at)
    if(at EQUAL -1)
      string(APPEND violations "\n  ${rel} includes \"${header}\" (folder '${dir}')")
    endif()
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" ", " allowed_text "${ALLOWED}")
  message(FATAL_ERROR "layer ${LAYER} may include only from ${allowed_text}; these reach "
                      "outside it (docs/architecture.md says which layer may use which):"
                      "${violations}")
endif()
