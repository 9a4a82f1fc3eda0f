# Run at build time (cmake -P): the CLI's --help texts, as text files and (with help2man) man pages.
# -DHCCT=<hcct> -DOUT=<dir> -DVERSION=<x.y.z> -DCOMMANDS=<a|b|...> [-DHELP2MAN=<help2man>]
string(REPLACE "|" ";" COMMANDS "${COMMANDS}")
file(MAKE_DIRECTORY "${OUT}")

function(help_text args output)
  separate_arguments(argv UNIX_COMMAND "${args}")
  execute_process(COMMAND "${HCCT}" ${argv} OUTPUT_FILE "${output}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "'${HCCT} ${args}' failed (${rc})")
  endif()
endfunction()

function(man_page args name description output)
  if(NOT HELP2MAN)
    return()
  endif()
  # --version-string: hcct has no --version option. help2man runs "<program> <help-option>".
  execute_process(
    COMMAND "${HELP2MAN}" --no-info --version-string=${VERSION} "--name=${description}"
            "--help-option=${args}" --output=${output} "${HCCT}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "help2man for '${name}' failed: ${err}")
  endif()
  # help2man names every page after the program: a subcommand's page is hcct-<subcommand>(1).
  if(NOT name STREQUAL "hcct")
    file(READ "${output}" page)
    string(TOUPPER "${name}" title)
    string(REPLACE ".TH HCCT " ".TH ${title} " page "${page}")
    string(REPLACE ".SH NAME\nhcct \\- " ".SH NAME\n${name} \\- " page "${page}")
    file(WRITE "${output}" "${page}")
  endif()
endfunction()

help_text("--help" "${OUT}/hcct.txt")
man_page("--help" hcct "calling-context profiler (CCT and Hot Calling Context Tree)" "${OUT}/hcct.1")
foreach(cmd IN LISTS COMMANDS)
  help_text("${cmd} --help" "${OUT}/hcct-${cmd}.txt")
  # The first line of a subcommand's --help says what it does.
  file(STRINGS "${OUT}/hcct-${cmd}.txt" summary LIMIT_COUNT 1)
  man_page("${cmd} --help" "hcct-${cmd}" "${summary}" "${OUT}/hcct-${cmd}.1")
endforeach()
