using System;
using CoreAI.Ai;
using CoreAI.Launcher;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>Which program starts the runtime.</summary>
    public enum RuntimeProgram
    {
        /// <summary>`coreai-runtime` of a Python environment (Runtime Path: that file, or the bare name on PATH).</summary>
        CoreAIRuntimeCommand,

        /// <summary>A Python environment's interpreter, run as `python -m pyruntime.cli` (Runtime Path: the python).</summary>
        PythonEnvironment,

        /// <summary>A runtime executable shipped with the game (Runtime Path: that file).</summary>
        BundledExecutable,
    }
}
