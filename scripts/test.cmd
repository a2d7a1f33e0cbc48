@echo off
rem Installs what is missing (Windows), then runs every test; arguments go to pytest.
call "%~dp0bootstrap.cmd" test %*
exit /b %errorlevel%
