using System;
using System.Threading;

namespace CoreAI.Runtime
{
    /// <summary>
    /// What hosts a client in a game: its main thread, the lifetime its calls end with, and whether game code may run
    /// now. The Unity layer fills it in (CoreAIRuntimeBootstrap.CreateClient): Unity's main-thread context, a token
    /// cancelled when Play Mode ends or the application quits, and Application.isPlaying.
    /// </summary>
    public sealed class GameHost
    {
        /// <summary>
        /// The main thread's SynchronizationContext. Game tools declared runOnMainThread run on it (required: without it
        /// and without a context at the turn's start such a tool is refused, never run on the thread pool), and stream
        /// callbacks do when the turn was started without a context (after a ConfigureAwait(false)).
        /// </summary>
        public SynchronizationContext MainThread { get; set; }

        /// <summary>Cancelled when the game stops (Play Mode ends, the application quits): every call of the client ends.</summary>
        public CancellationToken Lifetime { get; set; }

        /// <summary>
        /// Asked on <see cref="MainThread"/> right before a main-thread game tool's handler runs; false refuses the call
        /// (the model sees a failed result). Unity: Application.isPlaying, so no handler runs in Edit Mode. Null: always.
        /// </summary>
        public Func<bool> CanRunGameCode { get; set; }

        /// <summary>
        /// The scope of orchestrators and memory stores made without a scope provider (null: the empty scope). The Unity
        /// layer gives each Unity 6 Multiplayer Play Mode virtual player its own, so players sharing one runtime do not
        /// share NPC memory; a provider passed in always wins.
        /// </summary>
        public Ai.AgentMemoryScope DefaultScope { get; set; }
    }
}
