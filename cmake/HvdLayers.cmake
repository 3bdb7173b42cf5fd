# hvd_layer: one layer of dprun as its own static library, whose sources may include
# only their own layer's headers and those of the layers it names in DEPS
# (docs/architecture.md draws the layers).
#
#   hvd_layer(<target> [SHARED] DIRS <folder>... [DEPS <layer target>...]
#             [PROTOS <file>...] [EXCLUDE <file>...])
#
# DIRS are folders relative to the source root whose *.cc files the layer compiles;
# a header belongs to the layer of its folder (not of a parent folder). Before the
# layer compiles, cmake/check_layer.cmake reads every #include "..." of its sources
# and headers and fails the build, naming the file, the line and the layer the
# header belongs to, when one reaches outside the allowed folders. The linker holds
# the same line: a layer links only its DEPS, so a test of a lower layer that
# linked only it would not link against code from above.
set(HVD_LAYER_CHECK_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/check_layer.cmake)

function(hvd_layer name)
  cmake_parse_arguments(L "SHARED" "" "DIRS;DEPS;PROTOS;EXCLUDE" ${ARGN})
  set(sources "")
  set(headers "")
  foreach(dir ${L_DIRS})
    file(GLOB cc CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
    file(GLOB hh CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.h)
    list(APPEND sources ${cc})
    list(APPEND headers ${hh})
  endforeach()
  foreach(x ${L_EXCLUDE})
    list(REMOVE_ITEM sources ${CMAKE_SOURCE_DIR}/${x})
  endforeach()
  set(protos "")
  foreach(p ${L_PROTOS})
    list(APPEND protos ${CMAKE_SOURCE_DIR}/${p})
  endforeach()

  # The folders this layer may include from: its own and, transitively, its deps'.
  set(allowed ${L_DIRS})
  foreach(dep ${L_DEPS})
    get_property(dep_dirs GLOBAL PROPERTY HVD_LAYER_DIRS_${dep})
    list(APPEND allowed ${dep_dirs})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_property(GLOBAL PROPERTY HVD_LAYER_DIRS_${name} ${allowed})
  set_property(GLOBAL APPEND PROPERTY HVD_LAYERS ${name})

  if(L_SHARED)
    add_library(${name} SHARED ${sources} ${protos})
  else()
    add_library(${name} STATIC ${sources} ${protos})
  endif()
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}>
                                            $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}>)
  if(L_SHARED)
    # The layers below are linked into the shared library, not into its users.
    target_link_libraries(${name} PRIVATE ${L_DEPS})
  else()
    target_link_libraries(${name} PUBLIC ${L_DEPS})
  endif()
  if(protos)
    target_link_libraries(${name} PUBLIC protobuf::libprotobuf)
    protobuf_generate(TARGET ${name} LANGUAGE cpp
      IMPORT_DIRS ${CMAKE_SOURCE_DIR} PROTOC_OUT_DIR ${CMAKE_BINARY_DIR})
  endif()

  # The include check, re-run whenever a source or header of the layer changes.
  set(list_file ${CMAKE_BINARY_DIR}/layers/${name}.files)
  string(REPLACE ";" "\n" file_lines "${sources};${headers}")
  # Rewritten only when the list changes, so a configure alone does not re-run checks.
  file(WRITE ${list_file}.new "${file_lines}\n")
  configure_file(${list_file}.new ${list_file} COPYONLY)
  set(stamp ${CMAKE_BINARY_DIR}/layers/${name}.checked)
  string(REPLACE ";" "|" allowed_arg "${allowed}")
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DLAYER=${name} -DALLOWED=${allowed_arg}
            -DFILES=${list_file} -DROOT=${CMAKE_SOURCE_DIR} -P ${HVD_LAYER_CHECK_SCRIPT}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${sources} ${headers} ${HVD_LAYER_CHECK_SCRIPT} ${list_file}
    COMMENT "Checking the includes of layer ${name}"
    VERBATIM)
  add_custom_target(${name}_includes DEPENDS ${stamp})
  add_dependencies(${name} ${name}_includes)
endfunction()
