# Fails when a file of layer LAYER includes a project header from a folder outside
# ALLOWED (see cmake/HvdLayers.cmake). Run as:
#   cmake -DLAYER=<name> -DALLOWED=<dir|dir...> -DFILES=<file listing paths>
#         -DROOT=<source root> -P check_layer.cmake
# Only quoted includes are checked: <...> names system and third-party headers.
string(REPLACE "|" ";" ALLOWED "${ALLOWED}")
list(GET ALLOWED 0 home)  # the layer's own (first) folder
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
      # The rule broken, by the layer's folder and the header's (docs/architecture.md).
      if(home MATCHES "^runtime/" AND dir MATCHES "^(controller|launcher|bindings)(/|$)")
        set(rule "the data plane (runtime/) never includes controller/, launcher/ or bindings/")
      elseif(home MATCHES "^launcher$" AND NOT dir MATCHES "^launcher$")
        set(rule "launcher/ uses runtime/common and runtime/store only")
      elseif(home MATCHES "^controller(/|$)" AND dir MATCHES "^(launcher|bindings)(/|$)")
        set(rule "the coordinator (controller/) never includes launcher/ or bindings/")
      else()
        set(rule "a layer includes only its own folder and the layers below it")
      endif()
      string(APPEND violations "\n  ${rel} includes \"${header}\" (folder '${dir}'): ${rule}")
    endif()
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" ", " allowed_text "${ALLOWED}")
  message(FATAL_ERROR "layer ${LAYER} may include only from ${allowed_text}; these reach "
                      "outside it (docs/architecture.md says which layer may use which):"
                      "${violations}")
endif()
