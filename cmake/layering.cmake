# The layering of src/, enforced by the build: dtrain_layer() makes a layer's library and
# dtrain_check_includes() puts before any target a check (cmake/check_includes.cmake) that its files
# include only headers of itself and of the layers it declares. All of src/ stays one include root
# (headers say "nn/model.hpp"), so it is this check, not the include path, that makes a wrong
# include fail the build, with a message naming the file, the include and the missing layer.

# Layer folders (src/<folder>) and their layers, written once all are declared, for the checks.
set(DTRAIN_LAYER_MAP ${CMAKE_BINARY_DIR}/layering/layers.cmake)
function(_dtrain_write_layer_map)
  get_property(lines GLOBAL PROPERTY DTRAIN_LAYER_MAP_LINES)
  string(JOIN "\n" text "# folder -> layer, written by cmake/layering.cmake" ${lines})
  file(CONFIGURE OUTPUT ${DTRAIN_LAYER_MAP} CONTENT "${text}\n")
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _dtrain_write_layer_map)

# dtrain_check_includes(target FILES files... USES layers... [PUBLIC layers...] [OWN folders...]
#                       [DEPENDS files...] [LAYER])
# FILES are checked (a program's utility headers that they include beside them come along, and are
# named in DEPENDS so that a change to one checks again); they may include the headers of OWN
# folders (src/...), of the target's own layer and of the USES layers. With LAYER, the target is a
# layer: its headers (.hpp) may only include PUBLIC layers, since whatever links it sees them. USES
# may hold non-layers (GTest::gtest_main): they are skipped. The target need not exist (the CUDA
# plugin's check runs in builds without it).
function(dtrain_check_includes target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "LAYER" "" "FILES;USES;PUBLIC;OWN;DEPENDS")
  set(uses "")
  foreach(dep IN LISTS arg_USES)
    if(TARGET ${dep})
      get_target_property(folders ${dep} DTRAIN_LAYER_FOLDERS)
      if(folders)
        list(APPEND uses ${dep})
      endif()
    endif()
  endforeach()
  set(kind program)
  if(arg_LAYER)
    set(kind layer)
  endif()
  set(dir ${CMAKE_BINARY_DIR}/layering)
  set(spec ${dir}/${target}.spec.cmake)
  set(stamp ${dir}/${target}.ok)
  file(CONFIGURE OUTPUT ${spec} @ONLY CONTENT [[# What cmake/check_includes.cmake checks for @target@.
set(target "@target@")
set(kind "@kind@")
set(source_dir "@CMAKE_SOURCE_DIR@")
set(map "@DTRAIN_LAYER_MAP@")
set(files "@arg_FILES@")
set(own_folders "@arg_OWN@")
set(uses "@uses@")
set(public "@arg_PUBLIC@")
set(stamp "@stamp@")
]])
  # Runs again when a file, the spec, the layer map or the check changes.
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DSPEC=${spec} -P ${CMAKE_SOURCE_DIR}/cmake/check_includes.cmake
    DEPENDS ${arg_FILES} ${arg_DEPENDS} ${spec} ${DTRAIN_LAYER_MAP} ${CMAKE_SOURCE_DIR}/cmake/check_includes.cmake
    COMMENT "Checking the includes of ${target}" VERBATIM)
  # Part of every build; a target that is built waits for its check, so none of it is compiled
  # past a wrong include.
  add_custom_target(${target}_includes ALL DEPENDS ${stamp})
  if(TARGET ${target})
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      add_dependencies(${target} ${target}_includes)
    endif()
  endif()
endfunction()

# dtrain_layer(name folders [PUBLIC deps...] [PRIVATE deps...]): one static library per layer, of
# the .cpp files of its folders (one or a list of folders under src/). Its layer deps are exactly the
# layers its files include: PUBLIC where its headers include them, PRIVATE where only its .cpp files
# do; other deps (OpenMP::OpenMP_CXX, ...) are passed on as given. Layers are declared bottom-up: a
# layer may only use layers declared before it, so the layers cannot form a cycle.
function(dtrain_layer name folders)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "PUBLIC;PRIVATE")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dtrain_layer(${name}): say PUBLIC or PRIVATE before ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(layers "")
  set(public "")
  foreach(dep IN LISTS arg_PUBLIC arg_PRIVATE)
    if(dep MATCHES "^dtrain_")
      if(NOT TARGET ${dep})
        message(FATAL_ERROR "dtrain_layer(${name}) uses ${dep}, which is not declared above it: layers are "
                            "declared bottom-up, and a layer below ${name} cannot use it back")
      endif()
      list(APPEND layers ${dep})
      if(dep IN_LIST arg_PUBLIC)
        list(APPEND public ${dep})
      endif()
    endif()
  endforeach()
  set(srcs "")
  set(files "")
  foreach(f IN LISTS folders)
    file(GLOB found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${f}/*.cpp)
    file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${f}/*.hpp)
    list(APPEND srcs ${found})
    list(APPEND files ${found} ${headers})
    set_property(GLOBAL APPEND PROPERTY DTRAIN_LAYER_MAP_LINES "set(layer_of_${f} ${name})")
  endforeach()
  if(srcs)
    add_library(${name} STATIC ${srcs})
    # Compiled a batch of files at a time: the shared headers (JSON, the standard library) are parsed
    # and their templates instantiated once per batch, not once per file (a clean build: -45% here).
    set_target_properties(${name} PROPERTIES UNITY_BUILD ${DTRAIN_UNITY_BUILD})
    target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} PUBLIC ${arg_PUBLIC} PRIVATE ${arg_PRIVATE})
  else()  # a layer still being written: headers only
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${arg_PUBLIC} ${arg_PRIVATE})
  endif()
  set_target_properties(${name} PROPERTIES DTRAIN_LAYER_FOLDERS "${folders}")
  dtrain_check_includes(${name} LAYER FILES ${files} USES ${layers} PUBLIC ${public})
endfunction()

# dtrain_program(name source LINKS libs...): an executable of one source file that links libs; it
# may include the headers of the layers among them (as may the utility headers beside its file that
# it includes, which the check reads with it).
function(dtrain_program name src)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "LINKS")
  get_filename_component(src ${src} ABSOLUTE)
  get_filename_component(dir ${src} DIRECTORY)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE ${arg_LINKS})
  file(GLOB beside CONFIGURE_DEPENDS ${dir}/*.hpp)
  dtrain_check_includes(${name} FILES ${src} USES ${arg_LINKS} DEPENDS ${beside})
endfunction()
