# Embeds the chat page (this folder) into a target: a build step turns each file below into a byte array in
# web_assets_data.cpp (see embed_web_assets.cmake), served by src/server/web_assets_handler.cpp. Pure CMake: no xxd.
# markdown-it's browser build comes from npm (web/package.json, pinned by web/package-lock.json).

set(QINFER_WEB_DIR ${CMAKE_CURRENT_LIST_DIR})
set(QINFER_MARKDOWN_IT_BUILD ${QINFER_WEB_DIR}/node_modules/markdown-it/dist/browser/markdown-it.esm.min.mjs)

# URL path -> file, one pair per line of the manifest the build step reads.
set(QINFER_WEB_ASSETS
    "/=${QINFER_WEB_DIR}/index.html"
    "/static/app.js=${QINFER_WEB_DIR}/static/app.js"
    "/static/chat_stream.js=${QINFER_WEB_DIR}/static/chat_stream.js"
    "/static/markdown.js=${QINFER_WEB_DIR}/static/markdown.js"
    "/static/settings.js=${QINFER_WEB_DIR}/static/settings.js"
    "/static/style.css=${QINFER_WEB_DIR}/static/style.css"
    "/static/favicon.svg=${QINFER_WEB_DIR}/static/favicon.svg"
    "/static/vendor/markdown-it.mjs=${QINFER_MARKDOWN_IT_BUILD}")

function(qinfer_embed_web_assets target)
  if(NOT EXISTS ${QINFER_MARKDOWN_IT_BUILD})
    message(FATAL_ERROR "qinfer: the chat page needs markdown-it from npm, which is not installed in "
                        "${QINFER_WEB_DIR}/node_modules. Run tools/fetch-web-deps.sh (npm ci in web/; "
                        "tools/setup.sh runs it too), then configure again.")
  endif()
  set(manifest ${CMAKE_CURRENT_BINARY_DIR}/web_assets_manifest.txt)
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/web_assets_data.cpp)
  set(files)
  set(lines)
  foreach(entry ${QINFER_WEB_ASSETS})
    string(FIND "${entry}" "=" split)
    math(EXPR file_start "${split} + 1")
    string(SUBSTRING "${entry}" ${file_start} -1 file)
    list(APPEND files ${file})
    string(APPEND lines "${entry}\n")
  endforeach()
  file(CONFIGURE OUTPUT ${manifest} CONTENT "${lines}")
  add_custom_command(
    OUTPUT ${generated}
    COMMAND ${CMAKE_COMMAND} -DMANIFEST=${manifest} -DOUTPUT=${generated} -P ${QINFER_WEB_DIR}/embed_web_assets.cmake
    DEPENDS ${files} ${manifest} ${QINFER_WEB_DIR}/embed_web_assets.cmake
    COMMENT "Embedding the chat page (web/) into ${target}"
    VERBATIM)
  target_sources(${target} PRIVATE ${generated})
endfunction()
