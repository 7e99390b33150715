# Build-time check of one target's includes (cmake -DSPEC=<spec> -P check_includes.cmake), run by
# the custom command that cmake/layering.cmake puts before the target. Every `#include "X/..."` (or
# <X/...>) where src/X exists must name a header of the target itself or of a layer it declares; a
# layer's header may only include its PUBLIC layers; and each layer declared must be included (a
# PUBLIC one by a header), so the declarations are exact. A header beside a program's file (a
# test's utility, `#include "util.hpp"`) is read as part of that program. Violations are printed as
# `file:line: error: ...` and fail the build.
#
# SPEC (written at configure time) sets: target, kind (layer or program), source_dir, map (the file
# that sets layer_of_<folder> for every layer folder), files, own_folders, uses (layers every file
# may include), public (layers a layer's header may include), stamp (touched when all is well).
cmake_minimum_required(VERSION 3.25)
include(${SPEC})
include(${map})
string(REPLACE ";" " " uses_shown "${uses}")

set(errors "")
set(used "")          # the layers the files include
set(used_by_headers "")  # those a layer's headers include
set(visited "")
set(queue ${files})
while(queue)
  list(POP_FRONT queue file)
  if(file IN_LIST visited)
    continue()
  endif()
  list(APPEND visited ${file})
  file(RELATIVE_PATH shown ${source_dir} ${file})
  get_filename_component(dir ${file} DIRECTORY)
  set(header OFF)
  if(kind STREQUAL "layer" AND file MATCHES "\\.(h|hpp|cuh)$")
    set(header ON)
  endif()
  file(READ ${file} text)
  string(REGEX MATCHALL "(^|\n)[ \t]*#[ \t]*include[ \t]*[\"<][^\">\n]+[\">]" lines "${text}")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE ".*include[ \t]*[\"<]([^\">\n]+)[\">]" "\\1" inc "${line}")
    if(NOT inc MATCHES "/")
      # A header beside the file: a program's own utility is checked as part of it.
      if(EXISTS ${dir}/${inc} AND NOT shown MATCHES "^src/")
        list(APPEND queue ${dir}/${inc})
      endif()
      continue()
    endif()
    string(REGEX MATCH "^[^/]+" top "${inc}")
    if(NOT IS_DIRECTORY ${source_dir}/src/${top})
      continue()  # not dtrain's (gtest/, nlohmann/, ...)
    endif()
    get_filename_component(folder ${inc} DIRECTORY)
    set(owner "${layer_of_${folder}}")
    list(APPEND used ${owner})
    if(header)
      list(APPEND used_by_headers ${owner})
    endif()
    set(why "")
    if(folder IN_LIST own_folders OR owner STREQUAL target)
      # its own header
    elseif(owner STREQUAL "")
      set(why "src/${folder} belongs to no layer (a new folder goes into a dtrain_layer in CMakeLists.txt)")
    elseif(NOT owner IN_LIST uses)
      if(kind STREQUAL "layer")
        string(CONCAT why "it is ${owner}'s header, and ${target} does not link ${owner} (its layers: "
                          "${uses_shown}): add it to ${target}'s layers in CMakeLists.txt if ${target} may use "
                          "it, otherwise move the code")
      else()
        set(why "it is ${owner}'s header, and ${target} does not link ${owner} (it links: ${uses_shown})")
      endif()
    elseif(header AND NOT owner IN_LIST public)
      string(CONCAT why "${shown} is a header of ${target}, so what it includes is part of ${target}'s "
                        "interface: link ${owner} PUBLIC, not PRIVATE")
    endif()
    if(NOT why STREQUAL "")
      string(FIND "${text}" "${line}" at)
      string(SUBSTRING "${text}" 0 ${at} before)
      string(REGEX MATCHALL "\n" newlines "${before}")
      list(LENGTH newlines n)
      if(line MATCHES "^\n")
        math(EXPR n "${n} + 2")  # the match starts with the newline that ends the line before it
      else()
        set(n 1)
      endif()
      list(APPEND errors "${shown}:${n}: error: #include \"${inc}\" in ${target}: ${why}")
    endif()
  endforeach()
endwhile()

# Exactly, not only: a layer linked but not included is one too many, and so is PUBLIC where no
# header needs it.
foreach(layer IN LISTS uses)
  if(NOT layer IN_LIST used)
    string(CONCAT e "${target}: error: it links ${layer} but includes none of its headers: drop ${layer} from "
                    "${target}'s layers")
    list(APPEND errors "${e}")
  elseif(kind STREQUAL "layer" AND layer IN_LIST public AND NOT layer IN_LIST used_by_headers)
    string(CONCAT e "${target}: error: it links ${layer} PUBLIC but only its .cpp files include ${layer}'s "
                    "headers: link it PRIVATE")
    list(APPEND errors "${e}")
  endif()
endforeach()

if(NOT errors STREQUAL "")
  foreach(e IN LISTS errors)
    message(NOTICE "${e}")
  endforeach()
  list(LENGTH errors count)
  message(FATAL_ERROR "${target}: its includes and its declared layers disagree (${count} error(s) above; the "
                      "layering is explained in cmake/layering.cmake)")
endif()
file(TOUCH ${stamp})
