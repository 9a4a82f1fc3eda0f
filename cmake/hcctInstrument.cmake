# hcct_instrument(<target> [PLUGIN gcc|kpath] [STAGE early|late])
#
# Adds to <target>'s C and C++ compile options the instrumentation hcct profiles (docs/INSTALL.md):
#   (no PLUGIN)     -finstrument-functions; STAGE late: clang's -finstrument-functions-after-inlining
#                   (gcc has no such option: STAGE late needs PLUGIN gcc with gcc)
#   PLUGIN gcc      -fplugin=<hcct_plugin.so>, with -fplugin-arg-hcct_plugin-stage=STAGE if STAGE is
#                   given (the plugin's own default is late); needs the gcc version the plugin was
#                   built for (hcct_GCC_PLUGIN_GCC_VERSION)
#   PLUGIN kpath    -fpass-plugin=<kpath.so>, STAGE late: -mllvm -kpath-stage=late; needs clang of
#                   the LLVM major kpath.so was built for (hcct_KPATH_LLVM_VERSION). The probes call
#                   the runtime, so the target is also linked with hcct::runtime.
# STAGE early instruments before inlining, every source function; late after it, the optimised
# program's functions (docs/INLINING.md). Without STAGE: early for -finstrument-functions and kpath,
# late for PLUGIN gcc (docs/GCC-PLUGIN.md, "Which stage by default"). The program runs with the runtime either linked
# (target_link_libraries(<target> PRIVATE hcct::runtime)) or preloaded by `hcct record`.
#
# Set by hcctConfig.cmake before this file is included: hcct_GCC_PLUGIN, hcct_KPATH_PLUGIN (empty
# when not installed), hcct_GCC_PLUGIN_GCC_VERSION, hcct_KPATH_LLVM_VERSION.

function(hcct_instrument target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PLUGIN;STAGE" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "hcct_instrument(${target}): unknown arguments '${arg_UNPARSED_ARGUMENTS}' "
                        "(usage: hcct_instrument(<target> [PLUGIN gcc|kpath] [STAGE early|late]))")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "hcct_instrument: '${target}' is not a target")
  endif()
  set(stage_given "${arg_STAGE}")
  if(NOT arg_STAGE)
    set(arg_STAGE early)
  endif()
  if(NOT arg_STAGE MATCHES "^(early|late)$")
    message(FATAL_ERROR "hcct_instrument(${target}): STAGE '${arg_STAGE}' is not 'early' or 'late'")
  endif()

  # The compilers of the languages this project enabled that the flags apply to.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  list(FILTER languages INCLUDE REGEX "^(C|CXX)$")
  if(NOT languages)
    message(FATAL_ERROR "hcct_instrument(${target}): enable C or CXX in project() first")
  endif()
  set(lang_genex "$<COMPILE_LANGUAGE:${languages}>")
  string(REPLACE ";" "," lang_genex "${lang_genex}")

  if(NOT arg_PLUGIN)
    foreach(lang IN LISTS languages)
      if(arg_STAGE STREQUAL "late" AND NOT CMAKE_${lang}_COMPILER_ID MATCHES "Clang")
        message(FATAL_ERROR "hcct_instrument(${target}): STAGE late without a plugin needs clang "
                            "(-finstrument-functions-after-inlining); the ${lang} compiler is "
                            "${CMAKE_${lang}_COMPILER_ID}: use PLUGIN gcc STAGE late")
      endif()
    endforeach()
    if(arg_STAGE STREQUAL "late")
      target_compile_options(${target} PRIVATE "$<${lang_genex}:-finstrument-functions-after-inlining>")
    else()
      target_compile_options(${target} PRIVATE "$<${lang_genex}:-finstrument-functions>")
    endif()
  elseif(arg_PLUGIN STREQUAL "gcc")
    if(NOT hcct_GCC_PLUGIN OR NOT EXISTS "${hcct_GCC_PLUGIN}")
      message(FATAL_ERROR "hcct_instrument(${target}): this hcct was installed without the GCC plugin")
    endif()
    foreach(lang IN LISTS languages)
      # A gcc plugin loads only into the exact gcc it was built for.
      if(NOT CMAKE_${lang}_COMPILER_ID STREQUAL "GNU"
         OR NOT CMAKE_${lang}_COMPILER_VERSION VERSION_EQUAL hcct_GCC_PLUGIN_GCC_VERSION)
        message(FATAL_ERROR "hcct_instrument(${target}): PLUGIN gcc needs gcc ${hcct_GCC_PLUGIN_GCC_VERSION} "
                            "(the plugin's build); the ${lang} compiler is ${CMAKE_${lang}_COMPILER_ID} "
                            "${CMAKE_${lang}_COMPILER_VERSION}")
      endif()
    endforeach()
    target_compile_options(${target} PRIVATE "$<${lang_genex}:-fplugin=${hcct_GCC_PLUGIN}>")
    if(stage_given)
      target_compile_options(${target} PRIVATE "$<${lang_genex}:-fplugin-arg-hcct_plugin-stage=${arg_STAGE}>")
    endif()
  elseif(arg_PLUGIN STREQUAL "kpath")
    if(NOT hcct_KPATH_PLUGIN OR NOT EXISTS "${hcct_KPATH_PLUGIN}")
      message(FATAL_ERROR "hcct_instrument(${target}): this hcct was installed without kpath.so")
    endif()
    foreach(lang IN LISTS languages)
      # A pass plugin loads only into the clang major it was built against.
      string(REGEX MATCH "^[0-9]+" major "${CMAKE_${lang}_COMPILER_VERSION}")
      if(NOT CMAKE_${lang}_COMPILER_ID STREQUAL "Clang" OR NOT major EQUAL hcct_KPATH_LLVM_VERSION)
        message(FATAL_ERROR "hcct_instrument(${target}): PLUGIN kpath needs clang ${hcct_KPATH_LLVM_VERSION} "
                            "(kpath.so's LLVM); the ${lang} compiler is ${CMAKE_${lang}_COMPILER_ID} "
                            "${CMAKE_${lang}_COMPILER_VERSION}")
      endif()
    endforeach()
    target_compile_options(${target} PRIVATE "$<${lang_genex}:-fpass-plugin=${hcct_KPATH_PLUGIN}>")
    if(arg_STAGE STREQUAL "late")
      # clang knows the plugin's options only once it is loaded with -load as well.
      target_compile_options(${target} PRIVATE
        "$<${lang_genex}:SHELL:-Xclang -load -Xclang ${hcct_KPATH_PLUGIN}>"
        "$<${lang_genex}:SHELL:-mllvm -kpath-stage=late>")
    endif()
    target_link_libraries(${target} PRIVATE hcct::runtime)
  else()
    message(FATAL_ERROR "hcct_instrument(${target}): PLUGIN '${arg_PLUGIN}' is not 'gcc' or 'kpath'")
  endif()
endfunction()
