@echo off
rem Installs whatever is missing (Windows): a thin wrapper around tools\bootstrap.py. Arguments go to it
rem (doctor, run ARGS, test ARGS). Needs Python >= 3.11: winget install -e --id Python.Python.3.12
setlocal
set "PY=%COREAI_PYTHON%"
if "%PY%"=="" (
    where py >nul 2>nul && (set "PY=py -3") || (set "PY=python")
)
%PY% "%~dp0..\tools\bootstrap.py" %*
exit /b %errorlevel%
