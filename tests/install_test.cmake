# Installs the build into a temporary prefix, builds examples/consumer with
# find_package(splitdec) against it, and runs it on a tiny model.
set(work ${BUILD_DIR}/install-test)
file(REMOVE_RECURSE ${work})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${work}/prefix RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${work}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${work}/prefix RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configuring the consumer with find_package(splitdec) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${work}/build RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
execute_process(COMMAND ${SPLITDEC} make-model --preset tiny-gemma3 --out ${work}/model RESULT_VARIABLE rc OUTPUT_QUIET)
execute_process(COMMAND ${work}/build/chat_example ${work}/model ${work}/model/demo_image.npy
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "model: .*cache holds")
  message(FATAL_ERROR "the consumer did not run: ${out}")
endif()
file(REMOVE_RECURSE ${work})
