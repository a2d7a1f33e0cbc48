@echo off
rem The main job (Windows): installs what is missing, then runs the runtime with its embedded model until Ctrl+C.
rem Saves go to %COREAI_DATA_DIR% (default %LOCALAPPDATA%\coreai-runtime); arguments go to coreai-runtime serve.
call "%~dp0bootstrap.cmd" run %*
exit /b %errorlevel%
