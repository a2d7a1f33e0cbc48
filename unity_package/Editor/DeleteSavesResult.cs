using System;
using CoreAI.Launcher;

namespace CoreAI.EditorTools
{
    /// <summary>What <see cref="PersistentSaves.DeleteAll"/> did.</summary>
    public sealed class DeleteSavesResult
    {
        /// <summary>True when a CoreAI folder existed and was deleted.</summary>
        public bool Deleted { get; internal set; }

        /// <summary>Number of files deleted.</summary>
        public int FileCount { get; internal set; }

        /// <summary>True when a runtime that used these files was stopped first.</summary>
        public bool StoppedRuntime { get; internal set; }
    }
}
